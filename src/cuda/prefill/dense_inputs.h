// Inputs the attention kernel's bulk tensor copies cannot read in place: MX tensors (spec §5),
// dequantized exactly into bf16, and paged K/V caches (spec §4), gathered through the block table.
// Each is copied into a dense, contiguous workspace buffer that the plan sizes, which the kernel
// then reads as it reads any dense input. Plain C++: the API layer sees no device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mxattn/dtype.h"

namespace mxattn::cuda::prefill {

// Output [n0, n1, n2, dim], contiguous: bf16 for an MX source, else the source's type (bf16, f16).
// Row (i0, i1, i2) comes from source row (i0, i1, i2), or, paged, from slot i1 % page_size of page
// block_table[i0][i1 / page_size]. Source element strides; packed types contiguous along dim. MX
// scales (element strides): along dim, scales[outer, slot, i2, d / 32]; along the slots (V along
// the keys), scales[outer, i2, slot / 32, d].
struct DenseInputParams {
  const uint8_t* data = nullptr;
  DType dtype = DType::bf16;
  int64_t stride[4] = {};
  const uint8_t* scales = nullptr;
  int64_t scale_stride[4] = {};
  bool scales_along_slots = false;
  int64_t shape[4] = {};
  uint16_t* out = nullptr;
  // Paged: the block table [n0, table_stride] and the page size; null for a dense source.
  const int32_t* block_table = nullptr;
  int64_t table_stride = 0;
  int64_t page_size = 0;
  // Rows i1 >= valid_rows[i0] (keys past kv_len) are written as zeros, never read; null: all rows.
  const int32_t* valid_rows = nullptr;
};

// Launches the copy on `stream`; nothing to do for an empty tensor.
cudaError_t launch_dense_input(const DenseInputParams& params, cudaStream_t stream);

}  // namespace mxattn::cuda::prefill
