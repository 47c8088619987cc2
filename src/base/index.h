// Element offsets of an index in a strided view, and reads of int32 metadata on the host.
#pragma once

#include <cstdint>

#include "mxattn/tensor.h"

namespace mxattn::base {

// Element offset of index (i0, i1, ...) in a view.
inline int64_t offset_of(const TensorView& v, int64_t i0) {
  return i0 * v.stride[0];
}
inline int64_t offset_of(const TensorView& v, int64_t i0, int64_t i1) {
  return i0 * v.stride[0] + i1 * v.stride[1];
}
inline int64_t offset_of(const TensorView& v, int64_t i0, int64_t i1, int64_t i2) {
  return i0 * v.stride[0] + i1 * v.stride[1] + i2 * v.stride[2];
}
inline int64_t offset_of(const TensorView& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return i0 * v.stride[0] + i1 * v.stride[1] + i2 * v.stride[2] + i3 * v.stride[3];
}

// Reads one int32 element of a host view.
inline int32_t read_i32(const TensorView& v, int64_t offset) {
  return static_cast<const int32_t*>(v.data)[offset];
}

}  // namespace mxattn::base
