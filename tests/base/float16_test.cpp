// f16 and bf16 conversions against an independent computation in double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "base/float16.h"

namespace mxattn::base {
namespace {

// Round to nearest even with `mantissa_bits` fraction bits and smallest normal exponent `min_exp`;
// magnitudes that round to 2^(max_exp + 1) or beyond are infinite. Done in double, where x /
// quantum is exact and nearbyint rounds half to even.
double round_reference(float x, int mantissa_bits, int min_exp, int max_exp) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0f) return x;
  int exp;
  std::frexp(double(x), &exp);  // |x| in [2^(exp-1), 2^exp)
  const int quantum_exp = std::max(exp - 1, min_exp) - mantissa_bits;
  const double rounded =
      std::ldexp(std::nearbyint(std::ldexp(double(x), -quantum_exp)), quantum_exp);
  if (std::fabs(rounded) >= std::ldexp(1.0, max_exp + 1)) return std::copysign(INFINITY, x);
  return rounded;
}

double f16_reference(float x) {
  return round_reference(x, 10, -14, 15);
}
double bf16_reference(float x) {
  return round_reference(x, 7, -126, 127);
}

// Value of an f16 code from its fields, in double.
double f16_decode_reference(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  if (exp == 0x1f) return man ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(man, -24);
  return sign * std::ldexp(1024 + man, exp - 25);
}

// Inputs where rounding matters: each midpoint between neighbouring codes and its f32 neighbours,
// both signs, plus a sweep over every f32 exponent.
std::vector<float> rounding_inputs(float (*decode)(uint16_t), uint16_t largest_finite) {
  std::vector<float> xs;
  for (uint32_t h = 0; h < largest_finite; ++h) {
    const float mid = float((double(decode(uint16_t(h))) + double(decode(uint16_t(h + 1)))) / 2);
    const uint32_t u = float_bits(mid);
    for (uint32_t bits : {u - 1, u, u + 1}) {
      xs.push_back(bits_float(bits));
      xs.push_back(-bits_float(bits));
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffu; u += 40009) xs.push_back(bits_float(uint32_t(u)));
  return xs;
}

void expect_same(float got, double want) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got));
  } else {
    EXPECT_EQ(double(got), want);
    EXPECT_EQ(std::signbit(got), std::signbit(want));
  }
}

TEST(Float16, DecodesEveryCodeExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    SCOPED_TRACE(h);
    expect_same(f16_to_float(uint16_t(h)), f16_decode_reference(uint16_t(h)));
  }
}

TEST(Float16, EveryCodeRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    SCOPED_TRACE(h);
    const float x = f16_to_float(uint16_t(h));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(x))));
    } else {
      EXPECT_EQ(float_to_f16(x), h);
    }
  }
}

TEST(Float16, RoundsToNearestEven) {
  for (float x : rounding_inputs(f16_to_float, 0x7bff)) {
    SCOPED_TRACE(float_bits(x));
    expect_same(f16_to_float(float_to_f16(x)), f16_reference(x));
  }
}

TEST(Float16, Specials) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // the tie rounds to even: past the largest finite
  EXPECT_EQ(float_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
}

TEST(BFloat16, EveryCodeRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    SCOPED_TRACE(h);
    const float x = bf16_to_float(uint16_t(h));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(x))));
    } else {
      EXPECT_EQ(float_to_bf16(x), h);
    }
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  for (float x : rounding_inputs(bf16_to_float, 0x7f7f)) {
    SCOPED_TRACE(float_bits(x));
    expect_same(bf16_to_float(float_to_bf16(x)), bf16_reference(x));
  }
}

TEST(BFloat16, Specials) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);    // tie: even
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);    // tie: even, upwards
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffffu)), 0x7f80);    // FLT_MAX rounds to infinity
  EXPECT_EQ(float_to_bf16(bits_float(0x00000001u)), 0x0000);    // smallest f32 subnormal
  const uint16_t nan = float_to_bf16(bits_float(0x7f800001u));  // signalling NaN stays NaN
  EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
}

}  // namespace
}  // namespace mxattn::base
