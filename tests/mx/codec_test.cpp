// The element and scale codecs of src/mx/formats.h against the spec §5 definition
// (tests/mx/spec_formats.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/float16.h"
#include "mx/formats.h"
#include "mx/spec_formats.h"

namespace mxattn {
namespace {

using spec::ElementFormat;
using spec::kFormats;

bool same_value(double want, float got) {
  if (std::isnan(want)) return std::isnan(got);
  return double(got) == want && std::signbit(double(got)) == std::signbit(want);
}

unsigned sign_bit(const ElementFormat& f) {
  return 1u << (spec::code_bits(f) - 1);
}

// Positive finite codes in increasing order of value.
std::vector<unsigned> positive_finite_codes(const ElementFormat& f) {
  std::vector<unsigned> codes;
  for (unsigned c = 0; c < sign_bit(f); ++c) {
    if (std::isfinite(spec::value_of(f, c))) codes.push_back(c);
  }
  return codes;
}

TEST(Codec, EveryElementCodeDecodesToItsFieldValue) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (int c = 0; c < spec::code_count(f); ++c) {
      SCOPED_TRACE(c);
      EXPECT_TRUE(same_value(spec::value_of(f, unsigned(c)), mx::decode(f.type, uint8_t(c))));
    }
  }
}

TEST(Codec, TableAnchorsOfSpec5) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    double largest = 0;
    for (unsigned c : positive_finite_codes(f)) largest = std::max(largest, spec::value_of(f, c));
    EXPECT_EQ(largest, f.max_value);
    EXPECT_EQ(double(mx::format_info(f.type).max_value), f.max_value);
    EXPECT_EQ(mx::format_info(f.type).emax, f.emax);
    EXPECT_EQ(std::ilogb(f.max_value), f.emax);
  }
  const double e2m1_values[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (unsigned c = 0; c < 8; ++c)
    EXPECT_EQ(double(mx::decode(DType::e2m1, uint8_t(c))), e2m1_values[c]);
  EXPECT_TRUE(std::isnan(mx::decode(DType::e4m3, 0x7f)));
  EXPECT_TRUE(std::isnan(mx::decode(DType::e4m3, 0xff)));
  EXPECT_EQ(mx::decode(DType::e5m2, 0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(mx::decode(DType::e5m2, 0xfc), -std::numeric_limits<float>::infinity());
}

TEST(Codec, EveryScaleByteDecodesToItsPowerOfTwo) {
  for (unsigned byte = 0; byte < 256; ++byte) {
    SCOPED_TRACE(byte);
    EXPECT_TRUE(same_value(spec::scale_value(byte), mx::decode_scale(uint8_t(byte))));
  }
}

TEST(Codec, NonNanCodesRoundTrip) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (int c = 0; c < spec::code_count(f); ++c) {
      if (std::isnan(spec::value_of(f, unsigned(c)))) continue;
      SCOPED_TRACE(c);
      EXPECT_EQ(mx::encode(f.type, mx::decode(f.type, uint8_t(c))), c);
    }
  }
}

// Midpoints between neighbours go to the even code; a hair off the midpoint, to the nearer one.
TEST(Codec, RoundsToNearestTiesToEven) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    const std::vector<unsigned> codes = positive_finite_codes(f);
    for (size_t i = 0; i + 1 < codes.size(); ++i) {
      const unsigned lo = codes[i], hi = codes[i + 1];
      SCOPED_TRACE(lo);
      const float mid = float((spec::value_of(f, lo) + spec::value_of(f, hi)) / 2);
      ASSERT_EQ(double(mid), (spec::value_of(f, lo) + spec::value_of(f, hi)) / 2);
      const unsigned even = (lo & 1u) == 0 ? lo : hi;
      for (unsigned sign : {0u, sign_bit(f)}) {
        const float s = sign ? -1.0f : 1.0f;
        EXPECT_EQ(mx::encode(f.type, s * mid), sign | even);
        EXPECT_EQ(mx::encode(f.type, s * std::nextafter(mid, 0.0f)), sign | lo);
        EXPECT_EQ(mx::encode(f.type, s * std::nextafter(mid, 1e30f)), sign | hi);
      }
    }
  }
}

TEST(Codec, FiniteValuesBeyondMaxSaturate) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    const unsigned max_code = positive_finite_codes(f).back();
    const float beyond[] = {float(f.max_value) * 1.0001f, float(f.max_value) * 1.5f,
                            float(f.max_value) * 4.0f, 1e30f, std::numeric_limits<float>::max()};
    for (float x : beyond) {
      SCOPED_TRACE(x);
      EXPECT_EQ(mx::encode(f.type, x), max_code);
      EXPECT_EQ(mx::encode(f.type, -x), sign_bit(f) | max_code);
    }
  }
}

TEST(Codec, NonFiniteRulesPerType) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(mx::encode(DType::e4m3, inf), 0x7f);
  EXPECT_EQ(mx::encode(DType::e4m3, -inf), 0xff);
  EXPECT_TRUE(std::isnan(mx::decode(DType::e4m3, mx::encode(DType::e4m3, nan))));
  EXPECT_TRUE(std::isnan(mx::decode(DType::e4m3, mx::encode(DType::e4m3, -nan))));
  EXPECT_EQ(mx::encode(DType::e5m2, inf), 0x7c);
  EXPECT_EQ(mx::encode(DType::e5m2, -inf), 0xfc);
  EXPECT_TRUE(std::isnan(mx::decode(DType::e5m2, mx::encode(DType::e5m2, nan))));
  EXPECT_TRUE(mx::has_nonfinite_codes(DType::e4m3));
  EXPECT_TRUE(mx::has_nonfinite_codes(DType::e5m2));
  for (DType t : {DType::e2m3, DType::e3m2, DType::e2m1}) {
    EXPECT_FALSE(mx::has_nonfinite_codes(t));
    for (int c = 0; c < (1 << bits_of(t)); ++c)
      EXPECT_TRUE(std::isfinite(mx::decode(t, uint8_t(c))));
  }
}

TEST(Codec, SubnormalsAndTinyValues) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    const double smallest = std::ldexp(1.0, 1 - f.bias - f.mantissa_bits);
    EXPECT_EQ(double(mx::decode(f.type, 1)), smallest);
    EXPECT_EQ(mx::encode(f.type, float(smallest)), 1u);
    EXPECT_EQ(mx::encode(f.type, float(smallest / 2)), 0u);  // tie with zero: even
    EXPECT_EQ(mx::encode(f.type, std::nextafter(float(smallest / 2), 1.0f)), 1u);
    EXPECT_EQ(mx::encode(f.type, -float(smallest / 2)), sign_bit(f));
    EXPECT_EQ(mx::encode(f.type, 1e-40f), 0u);  // an f32 subnormal
    EXPECT_EQ(mx::encode(f.type, -1e-40f), sign_bit(f));
    EXPECT_EQ(mx::encode(f.type, -0.0f), sign_bit(f));
  }
}

int expected_floor_exponent(const ElementFormat& f, double amax) {
  return std::clamp(std::ilogb(amax) - f.emax, -127, 127);
}

int expected_rceil_exponent(const ElementFormat& f, double amax) {
  int e = -200;
  while (f.max_value * std::ldexp(1.0, e) < amax) ++e;
  return std::clamp(e, -127, 127);
}

// floor vs rceil at blocks whose amax sits at, just below and just above max_elem * 2^k and
// 2^(emax+k).
TEST(Codec, ScaleExponentModes) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (int k : {-130, -40, -3, 0, 1, 7, 100, 125}) {
      SCOPED_TRACE(k);
      for (double anchor : {f.max_value, double(1 << f.emax)}) {
        const float at = float(std::ldexp(anchor, k));
        if (at == 0.0f || !std::isfinite(at)) continue;
        for (float amax : {at, std::nextafter(at, 0.0f), std::nextafter(at, 1e38f)}) {
          if (!std::isfinite(amax)) continue;
          SCOPED_TRACE(amax);
          EXPECT_EQ(mx::scale_exponent(f.type, amax, ScaleMode::floor),
                    expected_floor_exponent(f, amax));
          EXPECT_EQ(mx::scale_exponent(f.type, amax, ScaleMode::rceil),
                    expected_rceil_exponent(f, amax));
        }
      }
      // Pinned: at max_elem * 2^k both modes give k; one ulp above, rceil moves up and floor stays.
      const float at_max = float(std::ldexp(f.max_value, k));
      if (k > -120 && k < 120) {
        EXPECT_EQ(mx::scale_exponent(f.type, at_max, ScaleMode::floor), k);
        EXPECT_EQ(mx::scale_exponent(f.type, at_max, ScaleMode::rceil), k);
        const float above = std::nextafter(at_max, 1e38f);
        EXPECT_EQ(mx::scale_exponent(f.type, above, ScaleMode::floor), k);
        EXPECT_EQ(mx::scale_exponent(f.type, above, ScaleMode::rceil), k + 1);
      }
    }
    EXPECT_EQ(mx::scale_exponent(f.type, 0.0f, ScaleMode::floor), 0);
    EXPECT_EQ(mx::scale_exponent(f.type, 0.0f, ScaleMode::rceil), 0);
    EXPECT_EQ(mx::scale_exponent(f.type, 1e-45f, ScaleMode::floor), -127);
    EXPECT_EQ(mx::scale_exponent(f.type, 1e-45f, ScaleMode::rceil), -127);
    const float largest = std::numeric_limits<float>::max();
    EXPECT_EQ(mx::scale_exponent(f.type, largest, ScaleMode::floor),
              expected_floor_exponent(f, largest));
    EXPECT_EQ(mx::scale_exponent(f.type, largest, ScaleMode::rceil),
              expected_rceil_exponent(f, largest));
  }
}

// In floor mode an amax above max_elem * 2^e saturates; in rceil mode nothing does.
TEST(Codec, QuantizeBlockSaturatesOnlyInFloorMode) {
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    const double max_code_value = f.max_value;
    float block[32] = {};
    block[5] = float(std::ldexp(1.0, f.emax + 1)) * 0.99f;  // above max_elem, below 2^(emax+1)
    block[9] = -0.25f;
    uint8_t codes[32];
    const uint8_t floor_scale = mx::quantize_block(f.type, block, 32, ScaleMode::floor, codes);
    EXPECT_EQ(floor_scale, 127);
    EXPECT_EQ(spec::value_of(f, codes[5]), max_code_value);
    const uint8_t rceil_scale = mx::quantize_block(f.type, block, 32, ScaleMode::rceil, codes);
    EXPECT_EQ(rceil_scale, 128);
    EXPECT_LE(std::fabs(spec::value_of(f, codes[5]) * 2 - block[5]),
              spec::quantum_at(f, block[5] / 2) / 2);
  }
}

TEST(Codec, QuantizeBlockNonFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (float bad : {nan, inf, -inf}) {
      float block[32];
      for (int i = 0; i < 32; ++i) block[i] = float(i) - 10.0f;
      block[3] = bad;
      uint8_t codes[32];
      const uint8_t scale = mx::quantize_block(f.type, block, 32, ScaleMode::floor, codes);
      if (f.ieee_inf_nan || f.nan_is_all_ones) {
        // amax over the finite values (21) sets the scale; the bad element keeps its kind.
        EXPECT_EQ(scale, 127 + expected_floor_exponent(f, 21.0));
        const double decoded = spec::value_of(f, codes[3]);
        if (f.ieee_inf_nan && std::isinf(bad)) {
          EXPECT_EQ(decoded, double(bad));
        } else {
          EXPECT_TRUE(std::isnan(decoded));
        }
        EXPECT_EQ(spec::value_of(f, codes[11]), 1.0 * std::ldexp(1.0, 127 - scale));
      } else {
        EXPECT_EQ(scale, 0xff);
        for (int i = 0; i < 32; ++i) EXPECT_EQ(codes[i], 0);
      }
    }
  }
}

// FP6: element k in bits [6k, 6k + 6) of little-endian 24-bit words. FP4: element 2i in the low
// nibble.
TEST(Codec, PackingAtTheByteLevel) {
  const uint8_t fp6_codes[8] = {0x3f, 0x01, 0x2a, 0x15, 0x00, 0x3e, 0x07, 0x38};
  uint8_t fp6_bytes[6] = {};
  for (int k = 0; k < 8; ++k) mx::store_code(DType::e2m3, fp6_bytes, k, fp6_codes[k]);
  for (int word = 0; word < 2; ++word) {
    uint32_t bits = 0;
    for (int j = 0; j < 4; ++j) bits |= uint32_t(fp6_codes[word * 4 + j]) << (6 * j);
    EXPECT_EQ(fp6_bytes[word * 3 + 0], uint8_t(bits));
    EXPECT_EQ(fp6_bytes[word * 3 + 1], uint8_t(bits >> 8));
    EXPECT_EQ(fp6_bytes[word * 3 + 2], uint8_t(bits >> 16));
  }
  const uint8_t fp6_expected_first[3] = {0x7f, 0xa0,
                                         0x56};  // 0x3f | 0x01 << 6 | 0x2a << 12 | 0x15 << 18
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fp6_bytes[i], fp6_expected_first[i]);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(mx::load_code(DType::e3m2, fp6_bytes, k), fp6_codes[k]);

  const uint8_t fp4_codes[4] = {0x1, 0xf, 0x8, 0x6};
  uint8_t fp4_bytes[2] = {};
  for (int k = 0; k < 4; ++k) mx::store_code(DType::e2m1, fp4_bytes, k, fp4_codes[k]);
  EXPECT_EQ(fp4_bytes[0], 0xf1);
  EXPECT_EQ(fp4_bytes[1], 0x68);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mx::load_code(DType::e2m1, fp4_bytes, k), fp4_codes[k]);

  // Storing one element leaves its neighbours' bits alone.
  uint8_t ones[3] = {0xff, 0xff, 0xff};
  mx::store_code(DType::e2m3, ones, 1, 0);
  EXPECT_EQ(ones[0], 0x3f);
  EXPECT_EQ(ones[1], 0xf0);
  EXPECT_EQ(ones[2], 0xff);
  uint8_t nibbles = 0xff;
  mx::store_code(DType::e2m1, &nibbles, 1, 0x2);
  EXPECT_EQ(nibbles, 0x2f);
}

}  // namespace
}  // namespace mxattn
