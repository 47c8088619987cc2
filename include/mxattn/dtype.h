// Element types of tensor views: plain floats, the OCP MX element types, E8M0 scales and integers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "mxattn/config.h"

namespace mxattn {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  e4m3,  // MXFP8
  e5m2,  // MXFP8
  e2m3,  // MXFP6
  e3m2,  // MXFP6
  e2m1,  // MXFP4
  e8m0,  // MX block scale
  i32,
  i64,  // slot mappings (vLLM's int64)
};

inline constexpr DType kAllDTypes[] = {DType::f32,  DType::f16,  DType::bf16, DType::e4m3,
                                       DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1,
                                       DType::e8m0, DType::i32,  DType::i64};

// Storage bits of one element. FP6 packs four elements in three bytes, FP4 two a byte.
MXATTN_HD constexpr int bits_of(DType t) {
  switch (t) {
    case DType::i64:
      return 64;
    case DType::f32:
    case DType::i32:
      return 32;
    case DType::f16:
    case DType::bf16:
      return 16;
    case DType::e2m3:
    case DType::e3m2:
      return 6;
    case DType::e2m1:
      return 4;
    default:
      return 8;
  }
}

// True for the element types that carry an E8M0 scale per 32-element block.
MXATTN_HD constexpr bool is_mx(DType t) {
  return t == DType::e4m3 || t == DType::e5m2 || t == DType::e2m3 || t == DType::e3m2 ||
         t == DType::e2m1;
}

// True for the plain floating types attention accepts unscaled (f32, f16, bf16).
MXATTN_HD constexpr bool is_plain_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

// Elements per packing group: a row of a packed type must start at a byte boundary.
MXATTN_HD constexpr int pack_group(DType t) {
  return bits_of(t) == 6 ? 4 : bits_of(t) == 4 ? 2 : 1;
}

// Canonical lower-case name ("f32", "bf16", "e4m3", ...).
std::string_view name_of(DType t);

// Parses a canonical name or a common alias ("mxfp8" = e4m3, "mxfp4" = e2m1, "float32", ...).
std::optional<DType> parse_dtype(std::string_view s);

}  // namespace mxattn
