// f16 and bf16 storage conversions (round to nearest even), host and device alike.
#pragma once

#include <cstdint>
#include <cstring>

#include "mxattn/config.h"

namespace mxattn::base {

MXATTN_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

MXATTN_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

MXATTN_HD inline float bf16_to_float(uint16_t h) {
  return bits_float(uint32_t(h) << 16);
}

MXATTN_HD inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

MXATTN_HD inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    // Subnormal (or zero): man * 2^-24, exact in f32.
    const float v = float(man) * bits_float(0x33800000u);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

MXATTN_HD inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: Inf
  if (a < 0x38800000u) {
    // Result is subnormal in f16: round a * 2^24 to an integer, nearest even.
    const float scaled = bits_float(a) * 16777216.0f;  // exact
    uint32_t q = uint32_t(scaled);
    const float rem = scaled - float(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

}  // namespace mxattn::base
