#include "mxattn/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace mxattn {

std::string_view name_of(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::e4m3:
      return "e4m3";
    case DType::e5m2:
      return "e5m2";
    case DType::e2m3:
      return "e2m3";
    case DType::e3m2:
      return "e3m2";
    case DType::e2m1:
      return "e2m1";
    case DType::e8m0:
      return "e8m0";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  for (DType t : kAllDTypes) {
    if (lower == name_of(t)) return t;
  }
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::f32}, {"fp32", DType::f32},        {"float16", DType::f16},
      {"fp16", DType::f16},    {"half", DType::f16},        {"bfloat16", DType::bf16},
      {"mxfp8", DType::e4m3},  {"mxfp8_e4m3", DType::e4m3}, {"mxfp8_e5m2", DType::e5m2},
      {"mxfp6", DType::e2m3},  {"mxfp6_e2m3", DType::e2m3}, {"mxfp6_e3m2", DType::e3m2},
      {"mxfp4", DType::e2m1},  {"mxfp4_e2m1", DType::e2m1}, {"int32", DType::i32},
      {"int64", DType::i64},
  };
  for (const Alias& a : kAliases) {
    if (lower == a.name) return a.type;
  }
  return std::nullopt;
}

}  // namespace mxattn
