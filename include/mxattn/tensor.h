// Non-owning tensor views: pointer, element type, shape, element strides and the bytes backed from the
// pointer. All sizes are 64-bit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "mxattn/dtype.h"

namespace mxattn {

inline constexpr int kMaxRank = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;  // 0: the argument is not given
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};  // in elements; packed types need stride 1 on the last axis
  int64_t bytes = 0;              // bytes backed from `data`

  bool given() const { return rank > 0; }
  int64_t numel() const;  // product of the shape (0 for an absent view)
  // Shape as "[1, 1024, 8, 4]".
  std::string shape_string() const;
};

// Contiguous row-major strides for `shape`.
void set_contiguous_strides(TensorView& v);

// A contiguous view over `bytes` bytes (by default exactly bytes_needed of the shape).
TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     int64_t bytes = -1);

// Bytes a view reads or writes from its pointer, following its shape and strides: the byte holding
// the bit after its farthest element. Packed types (FP6, FP4) count bits. nullopt when a stride is
// negative, a dimension is negative, or the size does not fit in 63 bits.
std::optional<int64_t> bytes_needed(const TensorView& v);

// Bytes of a contiguous tensor of `numel` elements of `dtype` (nullopt on overflow).
std::optional<int64_t> contiguous_bytes(DType dtype, int64_t numel);

}  // namespace mxattn

namespace mxattn {

// The same memory seen with its axes reordered: axis i of the result is axis order[i] of `v`.
TensorView permuted(const TensorView& v, std::initializer_list<int> order);

}  // namespace mxattn
