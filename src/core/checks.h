// The checks every validator of the API layer builds on (spec §7): a tensor argument's rank,
// element type, shape and memory, each failure a message that names the argument.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "base/storage.h"
#include "base/text.h"
#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn::core {

using base::cat;
using base::check_storage;

template <class... Parts>
inline Status invalid(const Parts&... parts) {
  return Status::invalid(cat(parts...));
}

// ceil(n / block) for n >= 0, block >= 1, without the overflow of (n + block - 1) / block.
inline int64_t blocks_of(int64_t n, int64_t block) {
  return n / block + (n % block != 0 ? 1 : 0);
}

inline bool rank_in_range(const TensorView& v) {
  return v.rank >= 1 && v.rank <= kMaxRank;
}

// "rank 3 [2, 16, 64]"; never reads past the shape array, whatever rank a caller wrote.
inline std::string describe_rank(const TensorView& v) {
  if (!rank_in_range(v)) return cat("rank ", v.rank);
  return cat("rank ", v.rank, " ", v.shape_string());
}

// The element types an argument accepts, with the words that describe them in messages.
struct DTypeSet {
  uint32_t mask = 0;
  std::string_view words;
  bool has(DType t) const { return unsigned(t) < 32 && ((mask >> unsigned(t)) & 1u) != 0; }
};

constexpr uint32_t bit(DType t) {
  return 1u << unsigned(t);
}
constexpr uint32_t kPlainBits = bit(DType::f32) | bit(DType::f16) | bit(DType::bf16);
constexpr uint32_t kMxBits =
    bit(DType::e4m3) | bit(DType::e5m2) | bit(DType::e2m3) | bit(DType::e3m2) | bit(DType::e2m1);

constexpr DTypeSet kPlainFloat{kPlainBits, "f32, f16 or bf16"};
constexpr DTypeSet kAttentionInput{
    kPlainBits | kMxBits, "f32, f16, bf16 or an MX element type (e4m3, e5m2, e2m3, e3m2, e2m1)"};
constexpr DTypeSet kF32{bit(DType::f32), "f32"};
constexpr DTypeSet kI32{bit(DType::i32), "i32 (int32)"};
constexpr DTypeSet kE8m0{bit(DType::e8m0), "e8m0"};

// An expected shape: its sizes and its symbolic form, e.g. "[B, Sq, Hq, Dqk]".
struct Shape {
  std::string_view axes;
  int rank = 0;
  int64_t dims[kMaxRank] = {};
};

inline Shape shape(std::string_view axes, std::initializer_list<int64_t> dims) {
  Shape s;
  s.axes = axes;
  for (int64_t d : dims) s.dims[s.rank++] = d;
  return s;
}

inline std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) out += cat(i ? ", " : "", s.dims[i]);
  return out + "]";
}

inline Status check_given_rank(std::string_view name, const TensorView& v, int rank,
                               std::string_view axes) {
  if (!v.given()) {
    return invalid(name, " is required (rank ", rank, " ", axes, ") but was not given");
  }
  if (v.rank != rank) {
    return invalid(name, " must have rank ", rank, " ", axes, ", found ", describe_rank(v));
  }
  return Status::ok();
}

inline Status check_dims_nonnegative(std::string_view name, const TensorView& v) {
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] < 0) {
      return invalid(name, " axis ", i, " must have a size >= 0, found ", v.shape[i], " (shape ",
                     v.shape_string(), ")");
    }
  }
  return Status::ok();
}

// The one check of a tensor argument: given, rank, element type, shape, then its memory.
inline Status check_view(std::string_view name, const TensorView& v, const DTypeSet& types,
                         const Shape& want) {
  if (Status st = check_given_rank(name, v, want.rank, want.axes); !st) return st;
  if (!types.has(v.dtype)) {
    return invalid(name, " must be ", types.words, ", found ", name_of(v.dtype));
  }
  if (Status st = check_dims_nonnegative(name, v); !st) return st;
  for (int i = 0; i < want.rank; ++i) {
    if (v.shape[i] != want.dims[i]) {
      return invalid(name, " must have shape ", want.axes, " = ", shape_string(want), ", found ",
                     v.shape_string());
    }
  }
  return check_storage(name, v);
}

inline Status check_optional_view(std::string_view name, const TensorView& v, const DTypeSet& types,
                                  const Shape& want) {
  return v.given() ? check_view(name, v, types, want) : Status::ok();
}

}  // namespace mxattn::core
