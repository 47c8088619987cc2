// The vector operations of the AVX2 kernels (AVX2, FMA, F16C): 8 f32 lanes.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/simd/exp2_poly.h"

namespace mxattn::cpu::simd {
namespace {

struct Avx2 {
  using F = __m256;
  static constexpr int kLanes = 8;
  // Register blocks: 12 of the 16 vector registers accumulate.
  static constexpr int kScoreKeys = 3;
  static constexpr int kScoreVecs = 4;
  static constexpr int kValueRows = 3;
  static constexpr int kValueVecs = 4;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }

  static F keep_between(F s, F k, F first, F last) {
    const F outside =
        _mm256_or_ps(_mm256_cmp_ps(k, first, _CMP_LT_OQ), _mm256_cmp_ps(k, last, _CMP_GT_OQ));
    return _mm256_blendv_ps(s, _mm256_set1_ps(-__builtin_inff()), outside);
  }
  static F zero_if_neg_inf(F x) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ), x);
  }

  // 2^x for x <= 0: 0 below about 2^-126.5 (so exactly 0 for -inf), NaN for NaN. Round(x) = -127,
  // the clamp, builds the exponent field 0, a multiplier of 0.
  static F exp2(F x) {
    x = _mm256_max_ps(_mm256_set1_ps(-127.0f), x);  // a NaN x is kept
    const F n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const F f = _mm256_sub_ps(x, n);
    F p = _mm256_set1_ps(kExp2Poly[6]);
    for (int i = 5; i >= 0; --i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
    const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
  }

  // Lane i of the result is the sum of the lanes of acc[i].
  static F reduce_lanes(const F* acc) {
    F pairs[4];
    for (int i = 0; i < 4; ++i) pairs[i] = _mm256_hadd_ps(acc[2 * i], acc[2 * i + 1]);
    const F quads[2] = {_mm256_hadd_ps(pairs[0], pairs[1]), _mm256_hadd_ps(pairs[2], pairs[3])};
    // quads[0] holds the low-half sums of acc[0..3] then their high-half sums; quads[1] likewise.
    const F low = _mm256_permute2f128_ps(quads[0], quads[1], 0x20);
    const F high = _mm256_permute2f128_ps(quads[0], quads[1], 0x31);
    return _mm256_add_ps(low, high);
  }

  static F from_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F from_bf16(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static F from_e5m2(const uint8_t* p) {
    const __m128i h =
        _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 8);
    return _mm256_cvtph_ps(h);
  }
  static F from_e4m3_over_256(const uint8_t* p) {
    const __m128i wide = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i h = _mm_and_si128(_mm_slli_epi16(wide, 7), _mm_set1_epi16(-16512));
    const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x3f80));
    const __m128i nan = _mm_cmpeq_epi16(magnitude, _mm_set1_epi16(0x3f80));
    return _mm256_cvtph_ps(_mm_blendv_epi8(h, _mm_set1_epi16(0x7e00), nan));
  }
  static void fp8_block32(bool e4m3, const uint8_t* p, F factor, float* dst) {
    for (int i = 0; i < 32; i += kLanes) {
      store(dst + i, mul(e4m3 ? from_e4m3_over_256(p + i) : from_e5m2(p + i), factor));
    }
  }
};

}  // namespace
}  // namespace mxattn::cpu::simd
