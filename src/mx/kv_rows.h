// One token's row of K or V as a cache stores it (spec §11), as host/device functions: the CPU
// and GPU cache writes and the GPU quantizer build on these, so that every path stores the same
// bits as quantizing the token on the host.
#pragma once

#include <cstdint>

#include "base/float16.h"
#include "mx/formats.h"
#include "mx/hadamard.h"
#include "mxattn/config.h"
#include "mxattn/dtype.h"

namespace mxattn::mx {

// The address of element `offset` of an array of `t` (for packed types, an offset at a packing
// group's start).
MXATTN_HD inline const uint8_t* element_address(const void* data, DType t, int64_t offset) {
  return static_cast<const uint8_t*>(data) + offset * bits_of(t) / 8;
}
MXATTN_HD inline uint8_t* element_address(void* data, DType t, int64_t offset) {
  return static_cast<uint8_t*>(data) + offset * bits_of(t) / 8;
}

// Element i of an f32, f16 or bf16 array, as f32 (exact).
MXATTN_HD inline float load_plain(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::f16:
      return base::f16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::bf16:
      return base::bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Stores x as element i of an f32, f16 or bf16 array (rounded to nearest even). A NaN is stored as
// the positive canonical NaN: its sign and payload are the processor's (see mx::encode).
MXATTN_HD inline void store_plain(void* data, DType t, int64_t i, float x) {
  if (x != x) x = base::bits_float(0x7fc00000u);
  switch (t) {
    case DType::f16:
      static_cast<uint16_t*>(data)[i] = base::float_to_f16(x);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(data)[i] = base::float_to_bf16(x);
      break;
    default:
      static_cast<float*>(data)[i] = x;
  }
}

// A token's row of n values (element stride `step`) as the cache stores it: rotated by the
// normalized Walsh-Hadamard transform (in f64, rounded to f32 once) where `rotate`, then `mean`
// (n values at element stride `mean_step`; optional) subtracted. `scratch` holds n doubles where
// `rotate`.
MXATTN_HD inline void prepare_row(const void* src, DType src_type, int64_t step, int64_t n,
                                  bool rotate, const float* mean, int64_t mean_step, float* out,
                                  double* scratch) {
  if (rotate) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = load_plain(src, src_type, i * step);
    hadamard_row(scratch, n);
    for (int64_t i = 0; i < n; ++i) out[i] = float(scratch[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = load_plain(src, src_type, i * step);
  }
  if (mean != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] -= mean[i * mean_step];
  }
}

// Stores block b (values x[0, count), count <= 32) of a cache row: an MX cache gets the block's
// codes at elements [32 b, 32 b + count) of `row` and its scale at scales[b]; a 16-bit cache the
// rounded values.
MXATTN_HD inline void store_block(DType cache_type, uint8_t* row, uint8_t* scales, int64_t b,
                                  const float* x, int count, ScaleMode mode) {
  const int64_t first = b * kMxBlock;
  if (is_mx(cache_type)) {
    uint8_t codes[kMxBlock];
    scales[b] = quantize_block(cache_type, x, count, mode, codes);
    for (int i = 0; i < count; ++i) store_code(cache_type, row, first + i, codes[i]);
  } else {
    for (int i = 0; i < count; ++i) store_plain(row, cache_type, first + i, x[i]);
  }
}

}  // namespace mxattn::mx
