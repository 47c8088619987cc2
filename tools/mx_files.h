// The files of a quantized tensor, as `mxattn quant` writes them and `mxattn dequant` reads them:
//   PREFIX.data.npy    u8, the packed codes: the logical shape, except that for FP6/FP4 the last
//   axis
//                      counts bytes (each row padded to whole packing groups, 3 bytes per 4 FP6
//                      elements, 1 byte per 2 FP4 elements)
//   PREFIX.scales.npy  u8 E8M0, the logical shape with the block axis cut to ceil(n / 32)
//   PREFIX.json        {"format": "e2m3", "axis": 1, "shape": [2, 64], "scale_mode": "floor"}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mxattn/mx.h"

namespace mxattn::tools {

struct MxLayout {
  DType format = DType::e4m3;
  int axis = 0;
  std::vector<int64_t> shape;  // logical
  ScaleMode mode = ScaleMode::floor;

  // Elements from one row's start to the next: the last dimension rounded up to whole packing
  // groups.
  int64_t row_elements() const;
  std::vector<int64_t> data_file_shape() const;  // in bytes along the last axis
  std::vector<int64_t> scales_shape() const;
  // Views of the element codes and the scales over buffers of `bytes` bytes.
  TensorView data_view(void* data, int64_t bytes) const;
  TensorView scales_view(void* data, int64_t bytes) const;
};

std::string data_path(const std::string& prefix);
std::string scales_path(const std::string& prefix);
std::string metadata_path(const std::string& prefix);

Status write_metadata(const std::string& prefix, const MxLayout& layout);
Status read_metadata(const std::string& prefix, MxLayout* layout);

std::string_view scale_mode_name(ScaleMode mode);

}  // namespace mxattn::tools
