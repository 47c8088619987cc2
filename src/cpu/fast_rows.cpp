#include "cpu/fast_rows.h"

#include "base/float16.h"
#include "mx/formats.h"

namespace mxattn::cpu {

RowElem row_elem(DType t) {
  switch (t) {
    case DType::f16:
      return RowElem::f16;
    case DType::bf16:
      return RowElem::bf16;
    case DType::e4m3:
      return RowElem::e4m3;
    case DType::e5m2:
      return RowElem::e5m2;
    case DType::e2m3:
    case DType::e3m2:
      return RowElem::fp6;
    case DType::e2m1:
      return RowElem::fp4;
    default:
      return RowElem::f32;
  }
}

int64_t bf16_dot_position(RowElem elem, int64_t d) {
  if (elem == RowElem::bf16) return d;
  const int64_t chunk = d / 128 * 128, in_chunk = d % 128;
  const int64_t block = in_chunk / 32, group = in_chunk % 32 / 8;
  return chunk + 32 * group + 8 * block + in_chunk % 8;
}

RowTables::RowTables(DType t) : elem_(row_elem(t)), scale_values_(256) {
  for (int e = 0; e < 256; ++e) scale_values_[size_t(e)] = mx::decode_scale(uint8_t(e));
  if (elem_ == RowElem::fp6 || elem_ == RowElem::fp4) {
    code_values_.resize(size_t(1) << bits_of(t));
    for (size_t c = 0; c < code_values_.size(); ++c) code_values_[c] = mx::decode(t, uint8_t(c));
  }
  if (elem_ == RowElem::e4m3 || elem_ == RowElem::e5m2) {
    // Every FP8 value is exact in bf16.
    code_bf16_bytes_.resize(256);
    for (size_t c = 0; c < 128; ++c) {
      const uint16_t bits = base::float_to_bf16(mx::decode(t, uint8_t(c)));
      code_bf16_bytes_[c] = uint8_t(bits & 0xff);
      code_bf16_bytes_[128 + c] = uint8_t(bits >> 8);
    }
  }
}

RowFormat RowTables::format(int64_t width, int64_t elem_stride, int64_t scale_span,
                            int64_t scale_step) const {
  RowFormat f;
  f.elem = elem_;
  f.width = width;
  f.elem_stride = elem_stride;
  f.scale_span = scale_span;
  f.scale_step = scale_step;
  f.scale_values = scale_values_.data();
  f.code_values = code_values_.empty() ? nullptr : code_values_.data();
  f.code_bf16_bytes = code_bf16_bytes_.empty() ? nullptr : code_bf16_bytes_.data();
  return f;
}

}  // namespace mxattn::cpu
