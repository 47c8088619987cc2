// NumPy .npy files (format versions 1, 2 and 3, C order, little-endian): '<f4' (f32), '<f2' (f16),
// '<V2' (bfloat16 as ml_dtypes writes it), '<i4' (i32) and '|u1' (raw bytes, loaded as DType::e8m0,
// the one byte-sized type: MX scales, or packed MX codes that the caller reinterprets).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/status.h"

namespace mxattn::tools {

// Reads a whole file. Anything else (another dtype, big-endian, fortran_order, a 0-d array, rank
// above kMaxRank, a short file) is an error that says what was found.
Status read_npy(const std::string& path, base::HostTensor* out);

// How read_npz reads its arrays: as read_npy does, or as index arrays, which also accept NumPy's
// default integer '<i8' and load it as i32 (a value outside int32 is an error).
enum class NpyRead { any, index };

// A NumPy .npz archive as np.savez writes it (a ZIP of .npy members, stored, zip64 sizes or not):
// each member array under its name without ".npy", in the archive's order. A compressed member
// (np.savez_compressed) is an error that says so.
Status read_npz(const std::string& path, NpyRead how,
                std::vector<std::pair<std::string, base::HostTensor>>* out);

// How a loaded dtype reads in messages: "u8" for the bytes, else the dtype's name.
std::string npy_type_name(DType t);

// Writes a contiguous f32, f16, bf16, i32 or byte (e8m0) view.
Status write_npy(const std::string& path, const TensorView& v);

}  // namespace mxattn::tools
