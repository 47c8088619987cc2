// Argument checks and index walking shared by the MX tensor functions (quantize, dequantize, the
// Hadamard rotation, K smoothing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn::mx {

// A given view of rank 1..kMaxRank: checked before anything reads its shape.
inline Status check_given(const char* name, const TensorView& v) {
  if (!v.given()) return Status::invalid(std::string(name) + " is not given");
  if (v.rank > kMaxRank) {
    return Status::invalid(std::string(name) + " has rank " + std::to_string(v.rank) +
                           " but at most " + std::to_string(kMaxRank) + " is supported");
  }
  return Status::ok();
}

// A given view with non-negative strides whose backed bytes cover its extent (SPEC 7's message:
// "scales need 4096 bytes for shape [1, 1024, 8, 4] but only 3072 are backed").
inline Status check_backed(const char* name, const TensorView& v) {
  if (Status s = check_given(name, v); !s) return s;
  const std::optional<int64_t> needed = bytes_needed(v);
  if (!needed) {
    return Status::invalid(std::string(name) + " with shape " + v.shape_string() +
                           " has a negative dimension or stride, or a size past 2^63 bytes");
  }
  if (*needed > v.bytes) {
    const char* verb = std::string_view(name).ends_with('s') ? " need " : " needs ";
    return Status::invalid(std::string(name) + verb + std::to_string(*needed) +
                           " bytes for shape " + v.shape_string() + " but only " +
                           std::to_string(v.bytes) + " are backed");
  }
  if (*needed > 0 && v.data == nullptr) {
    return Status::invalid(std::string(name) + " has a null data pointer");
  }
  return Status::ok();
}

// Packed types (FP6, FP4) address a row by its first bit, so every row must start on a byte: the
// last axis contiguous and every other stride a whole number of packing groups.
inline Status check_packed_rows(const char* name, const TensorView& v) {
  const int group = pack_group(v.dtype);
  if (group == 1) return Status::ok();
  for (int i = 0; i < v.rank; ++i) {
    const bool ok = i == v.rank - 1 ? v.stride[i] == 1 : v.stride[i] % group == 0;
    if (!ok) {
      return Status::invalid(std::string(name) + " (" + std::string(name_of(v.dtype)) +
                             ") needs stride 1 on its last axis and other strides that are " +
                             "multiples of " + std::to_string(group) + " elements");
    }
  }
  return Status::ok();
}

// Enumerates the index combinations of a subset of a view's axes (the "outer" axes of a loop), in
// row-major order, and turns the n-th one into an element offset of any view of the same rank.
class OuterAxes {
 public:
  // Every axis of `shape` except `skip_a` and `skip_b` (-1: none).
  OuterAxes(const TensorView& shape, int skip_a, int skip_b = -1) {
    for (int i = 0; i < shape.rank; ++i) {
      if (i == skip_a || i == skip_b) continue;
      axes_[count_axes_] = i;
      extent_[count_axes_] = shape.shape[i];
      ++count_axes_;
      combinations_ *= shape.shape[i];
    }
  }

  int64_t combinations() const { return combinations_; }

  int64_t offset(const TensorView& v, int64_t n) const {
    int64_t offset = 0;
    for (int i = count_axes_ - 1; i >= 0; --i) {
      offset += (n % extent_[i]) * v.stride[axes_[i]];
      n /= extent_[i];
    }
    return offset;
  }

 private:
  int axes_[kMaxRank] = {};
  int64_t extent_[kMaxRank] = {};
  int count_axes_ = 0;
  int64_t combinations_ = 1;
};

}  // namespace mxattn::mx
