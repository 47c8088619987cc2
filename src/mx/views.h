// Argument checks and index walking shared by the MX tensor functions (quantize, dequantize, the
// Hadamard rotation, K smoothing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/storage.h"
#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn::mx {

// A given view of rank 1..kMaxRank.
inline Status check_given(const char* name, const TensorView& v) {
  if (!v.given()) return Status::invalid(std::string(name) + " is not given");
  if (v.rank > kMaxRank) {
    return Status::invalid(std::string(name) + " has rank " + std::to_string(v.rank) +
                           " but at most " + std::to_string(kMaxRank) + " is supported");
  }
  return Status::ok();
}

// A given view whose memory passes base::check_storage (strides, packing, size, bytes backed).
inline Status check_backed(const char* name, const TensorView& v) {
  if (Status s = check_given(name, v); !s) return s;
  return base::check_storage(name, v);
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
