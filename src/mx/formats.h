// spec §5: the MX element codecs (E4M3, E5M2, E2M3, E3M2, E2M1), the E8M0 scale, the block scale
// exponent and the FP6/FP4 packing. The one definition used by quantizers, every engine and the
// CLI.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/float16.h"
#include "mxattn/config.h"
#include "mxattn/dtype.h"
#include "mxattn/mx.h"

namespace mxattn::mx {

struct FormatInfo {
  int ebits = 0;
  int mbits = 0;
  int bias = 0;
  int emax = 0;               // exponent of the largest normal (emax_elem of spec §5)
  float max_value = 0;        // largest finite magnitude
  bool ieee_special = false;  // E5M2: exponent all ones is Inf/NaN
  bool nan_code = false;      // E4M3: S.1111.111 is NaN
};

MXATTN_HD constexpr FormatInfo format_info(DType t) {
  switch (t) {
    case DType::e4m3:
      return {4, 3, 7, 8, 448.0f, false, true};
    case DType::e5m2:
      return {5, 2, 15, 15, 57344.0f, true, false};
    case DType::e2m3:
      return {2, 3, 1, 2, 7.5f, false, false};
    case DType::e3m2:
      return {3, 2, 3, 4, 28.0f, false, false};
    case DType::e2m1:
      return {2, 1, 1, 2, 6.0f, false, false};
    default:
      return {};
  }
}

// 2^e as f32 for e in [-149, 127], exact (subnormal results included).
MXATTN_HD inline float exp2i(int e) {
  if (e >= -126) return base::bits_float(uint32_t(e + 127) << 23);
  return base::bits_float(1u << (e + 149));
}

// E8M0: 2^(e - 127); 0xFF is NaN.
MXATTN_HD inline float decode_scale(uint8_t e) {
  return e == 0xff ? base::bits_float(0x7fc00000u) : exp2i(int(e) - 127);
}

// Value of an element code (the code in the low bits of `code`).
MXATTN_HD inline float decode(DType t, uint8_t code) {
  const FormatInfo f = format_info(t);
  const int bits = 1 + f.ebits + f.mbits;
  const bool neg = (code >> (bits - 1)) & 1;
  const int exp = (code >> f.mbits) & ((1 << f.ebits) - 1);
  const int man = code & ((1 << f.mbits) - 1);
  float v;
  if (f.ieee_special && exp == (1 << f.ebits) - 1) {
    v = man == 0 ? base::bits_float(0x7f800000u) : base::bits_float(0x7fc00000u);
  } else if (f.nan_code && exp == (1 << f.ebits) - 1 && man == (1 << f.mbits) - 1) {
    v = base::bits_float(0x7fc00000u);
  } else if (exp == 0) {
    v = float(man) * exp2i(1 - f.bias - f.mbits);
  } else {
    v = float((1 << f.mbits) + man) * exp2i(exp - f.bias - f.mbits);
  }
  return neg ? -v : v;
}

// Code of the largest finite magnitude, positive.
MXATTN_HD inline uint8_t max_code(DType t) {
  const FormatInfo f = format_info(t);
  if (f.nan_code) return uint8_t(((1 << (f.ebits + f.mbits)) - 1) - 1);  // S.1111.110
  if (f.ieee_special) return uint8_t((((1 << f.ebits) - 2) << f.mbits) | ((1 << f.mbits) - 1));
  return uint8_t((1 << (f.ebits + f.mbits)) - 1);
}

// Encodes an already scaled value: round to nearest even, finite values saturate to +-max.
// NaN (and Inf for E4M3) give the NaN code where the format has one; E5M2 keeps Inf. FP6/FP4 have
// neither: callers mark such a block with the NaN scale, and the element code here is 0.
MXATTN_HD inline uint8_t encode(DType t, float x) {
  const FormatInfo f = format_info(t);
  const int bits = 1 + f.ebits + f.mbits;
  const uint32_t u = base::float_bits(x);
  const uint8_t sign = uint8_t((u >> 31) << (bits - 1));
  const uint32_t a_bits = u & 0x7fffffffu;
  const bool is_nan = a_bits > 0x7f800000u;
  const bool is_inf = a_bits == 0x7f800000u;
  // A NaN's sign means nothing, and arithmetic leaves it to the processor (an x86 core keeps an
  // operand's, a GPU returns a canonical NaN): every NaN takes the positive NaN code, so that the
  // host and the GPU store the same bits. Inf keeps its sign.
  if (is_nan || is_inf) {
    if (f.nan_code) return uint8_t((is_nan ? 0 : sign) | ((1 << (bits - 1)) - 1));
    if (f.ieee_special) {
      const uint8_t exp_all = uint8_t(((1 << f.ebits) - 1) << f.mbits);
      return is_nan ? uint8_t(exp_all | (1 << (f.mbits - 1))) : uint8_t(sign | exp_all);
    }
    return 0;
  }
  const float a = base::bits_float(a_bits);
  if (a >= f.max_value) return uint8_t(sign | max_code(t));
  // Exponent of a, floored to the format's smallest normal exponent (subnormals share its quantum).
  const int emin = 1 - f.bias;
  int e = a_bits == 0 ? emin : int(a_bits >> 23) - 127;
  if (a_bits != 0 && (a_bits >> 23) == 0) e = -127;  // f32 subnormal: far below any quantum
  if (e < emin) e = emin;
  const float quantum = exp2i(e - f.mbits);
  uint32_t q = uint32_t(rintf(a / quantum));  // exact division by a power of two, then RNE
  if (q >= (2u << f.mbits)) {                 // rounding carried into the next binade
    q >>= 1;
    ++e;
  }
  uint32_t code;
  if (q < (1u << f.mbits)) {
    code = q;  // subnormal (e == emin) or zero
  } else {
    code = (uint32_t(e + f.bias) << f.mbits) | (q - (1u << f.mbits));
  }
  if (code > max_code(t)) code = max_code(t);
  return uint8_t(sign | code);
}

// Block scale exponent (unbiased, clamped to [-127, 127]) for a block whose largest finite
// magnitude is `amax`; amax = 0 gives 0.
MXATTN_HD inline int scale_exponent(DType t, float amax, ScaleMode mode) {
  if (!(amax > 0.0f)) return 0;
  const FormatInfo f = format_info(t);
  const uint32_t u = base::float_bits(amax);
  int floor_log2 = int(u >> 23) - 127;
  if ((u >> 23) == 0) {  // f32 subnormal
    floor_log2 = -127;
    for (uint32_t m = u & 0x7fffffu; m > 1; m >>= 1) ++floor_log2;
    floor_log2 -= 22;
  }
  int e = floor_log2 - f.emax;
  if (mode == ScaleMode::rceil) {
    // Smallest e with max_value * 2^e >= amax: either floor_log2 - emax or one more.
    if (double(amax) > double(f.max_value) * ldexp(1.0, e)) ++e;
  }
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

// FP6 and FP4 have no NaN or Inf code: a block holding a non-finite value carries this scale
// instead.
inline constexpr uint8_t kNanScale = 0xff;

MXATTN_HD constexpr bool has_nonfinite_codes(DType t) {
  return format_info(t).ieee_special || format_info(t).nan_code;
}

// A value's magnitude for the block maximum: its absolute value, or -1 for NaN and Inf, which the
// maximum leaves out (spec §5: amax is taken over the finite values).
MXATTN_HD inline float finite_magnitude(float x) {
  const uint32_t a_bits = base::float_bits(x) & 0x7fffffffu;
  return a_bits >= 0x7f800000u ? -1.0f : base::bits_float(a_bits);
}

// The E8M0 scale byte of a block whose largest finite magnitude is `amax` and which holds a NaN
// or an Inf where `nonfinite`: formats without such codes (FP6, FP4) mark the block NaN
// (kNanScale). Every quantizer, on the host and on the GPU, takes a block's scale from here, so
// that they agree to the bit however they find the maximum.
MXATTN_HD inline uint8_t block_scale(DType t, float amax, bool nonfinite, ScaleMode mode) {
  if (nonfinite && !has_nonfinite_codes(t)) return kNanScale;
  return uint8_t(scale_exponent(t, amax, mode) + 127);
}

// The element code of x in a block of scale byte `scale`: x times 2^-e, encoded. 2^-e is a normal or
// subnormal f32 for e in [-127, 127], so the product is exact unless it falls below f32's normal
// range, where every format rounds it to zero anyway. A NaN-scaled block's codes are 0.
MXATTN_HD inline uint8_t block_code(DType t, uint8_t scale, float x) {
  if (scale == kNanScale) return 0;
  return encode(t, x * exp2i(127 - int(scale)));
}

// Quantizes one block of `count` <= 32 values (spec §5): writes `count` element codes and returns
// the E8M0 scale byte.
MXATTN_HD inline uint8_t quantize_block(DType t, const float* x, int count, ScaleMode mode,
                                        uint8_t* codes) {
  float amax = 0.0f;
  bool nonfinite = false;
  for (int i = 0; i < count; ++i) {
    const float m = finite_magnitude(x[i]);
    nonfinite = nonfinite || m < 0.0f;
    amax = m > amax ? m : amax;
  }
  const uint8_t scale = block_scale(t, amax, nonfinite, mode);
  for (int i = 0; i < count; ++i) codes[i] = block_code(t, scale, x[i]);
  return scale;
}

// Element k of a packed row of codes (FP8: byte k; FP6: bits [6k, 6k + 6) of the little-endian
// 24-bit words; FP4: nibble k, even k in the low nibble).
MXATTN_HD inline uint8_t load_code(DType t, const uint8_t* row, int64_t k) {
  const int bits = bits_of(t);
  if (bits == 8) return row[k];
  if (bits == 4) return uint8_t((row[k >> 1] >> ((k & 1) * 4)) & 0xf);
  const int64_t bit = k * 6;
  const int64_t byte = bit >> 3;
  const int shift = int(bit & 7);
  uint32_t w = row[byte];
  if (shift > 2) w |= uint32_t(row[byte + 1]) << 8;
  return uint8_t((w >> shift) & 0x3f);
}

MXATTN_HD inline void store_code(DType t, uint8_t* row, int64_t k, uint8_t code) {
  const int bits = bits_of(t);
  if (bits == 8) {
    row[k] = code;
  } else if (bits == 4) {
    const int shift = int(k & 1) * 4;
    row[k >> 1] = uint8_t((row[k >> 1] & ~(0xf << shift)) | ((code & 0xf) << shift));
  } else {
    const int64_t bit = k * 6;
    const int64_t byte = bit >> 3;
    const int shift = int(bit & 7);
    const uint32_t mask = 0x3fu << shift;
    uint32_t w = row[byte] | (shift > 2 ? uint32_t(row[byte + 1]) << 8 : 0u);
    w = (w & ~mask) | (uint32_t(code & 0x3f) << shift);
    row[byte] = uint8_t(w);
    if (shift > 2) row[byte + 1] = uint8_t(w >> 8);
  }
}

}  // namespace mxattn::mx
