// The vector operations of the AVX-512 kernels (F, BW, VL): 16 f32 lanes.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/simd/exp2_poly.h"

namespace mxattn::cpu::simd {
namespace {

struct Avx512 {
  using F = __m512;
  static constexpr int kLanes = 16;
  // Register blocks: 24 of the 32 vector registers accumulate.
  static constexpr int kScoreKeys = 6;  // scores_by_row_lanes: keys x row vectors
  static constexpr int kScoreVecs = 4;
  static constexpr int kValueRows = 6;  // accumulate_values: rows x column vectors
  static constexpr int kValueVecs = 4;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  // max(a, b) where a NaN b wins, so a NaN score reaches the running maximum.
  static F max(F a, F b) { return _mm512_max_ps(a, b); }

  // s where first <= k <= last, else -inf.
  static F keep_between(F s, F k, F first, F last) {
    const __mmask16 outside =
        _mm512_cmp_ps_mask(k, first, _CMP_LT_OQ) | _mm512_cmp_ps_mask(k, last, _CMP_GT_OQ);
    return _mm512_mask_mov_ps(s, outside, _mm512_set1_ps(-__builtin_inff()));
  }
  // -inf becomes 0, everything else stays.
  static F zero_if_neg_inf(F x) {
    const __mmask16 neg_inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-__builtin_inff()), _CMP_EQ_OQ);
    return _mm512_mask_mov_ps(x, neg_inf, _mm512_setzero_ps());
  }

  // 2^x for x <= 0: exactly 0 for -inf, NaN for NaN. scalef scales by 2^round(x) without building
  // an exponent by hand, and flushes to 0 far below the smallest denormal. Degree 6 (kExp2Poly,
  // f32 accuracy) or 4 (kExp2Poly4, for weights kept to 16 bits).
  template <int Degree = 6>
  static F exp2(F x) {
    static_assert(Degree == 6 || Degree == 4);
    const float* c = Degree == 6 ? kExp2Poly : kExp2Poly4;
    x = _mm512_max_ps(_mm512_set1_ps(-200.0f), x);  // -inf -> -200; a NaN x is kept
    const F n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const F f = _mm512_sub_ps(x, n);
    F p = _mm512_set1_ps(c[Degree]);
    for (int i = Degree - 1; i >= 0; --i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c[i]));
    return _mm512_scalef_ps(p, n);
  }

  // Lane i of the result is the sum of the lanes of acc[i].
  static F reduce_lanes(const F* acc) {
    return fold_lanes(acc, [](F a, F b) { return _mm512_add_ps(a, b); });
  }

  // Lane i of the result is the lanes of acc[i] combined by `op` (associative and commutative).
  template <class Op>
  static F fold_lanes(const F* acc, Op op) {
    // Each step combines the halves of pairs, so 16 vectors of 16 partial results become 1 of 16.
    F half[8];
    for (int i = 0; i < 8; ++i) {
      const F a = acc[2 * i], b = acc[2 * i + 1];
      half[i] = op(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    F quarter[4];
    for (int i = 0; i < 4; ++i) {
      const F a = half[2 * i], b = half[2 * i + 1];
      quarter[i] = op(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
    }
    F eighth[2];
    for (int i = 0; i < 2; ++i) {
      const F a = quarter[2 * i], b = quarter[2 * i + 1];
      eighth[i] = op(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
    }
    const F folded = op(_mm512_shuffle_ps(eighth[0], eighth[1], 0x88),
                        _mm512_shuffle_ps(eighth[0], eighth[1], 0xDD));
    // The shuffles leave the results in a fixed interleaved order; put each back in its lane.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, folded);
  }

  static F from_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F from_bf16(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // E5M2 is the upper byte of an f16 with the same bias, specials included.
  static F from_e5m2(const uint8_t* p) {
    const __m256i h = _mm256_slli_epi16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 8);
    return _mm512_cvtph_ps(h);
  }
  // E4M3 times 2^-8: placed in an f16 (sign at bit 15, exponent and mantissa at bits 7..13) it
  // reads as the E4M3 value over 2^8, subnormals included; S.1111.111 is replaced by an f16 NaN.
  static F from_e4m3_over_256(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(-16512));
    const __m256i magnitude = _mm256_and_si256(h, _mm256_set1_epi16(0x3f80));
    const __mmask16 nan = _mm256_cmpeq_epi16_mask(magnitude, _mm256_set1_epi16(0x3f80));
    return _mm512_cvtph_ps(_mm256_mask_mov_epi16(h, nan, _mm256_set1_epi16(0x7e00)));
  }
  // 32 FP8 codes (E4M3 over 2^8, or E5M2) times `factor`, into dst: the same decode as above with
  // 32 16-bit lanes at a time.
  static void fp8_block32(bool e4m3, const uint8_t* p, F factor, float* dst) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    __m512i h;
    if (e4m3) {
      h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(bytes), 7),
                           _mm512_set1_epi16(-16512));
      const __m512i magnitude = _mm512_and_si512(h, _mm512_set1_epi16(0x3f80));
      const __mmask32 nan = _mm512_cmpeq_epi16_mask(magnitude, _mm512_set1_epi16(0x3f80));
      h = _mm512_mask_mov_epi16(h, nan, _mm512_set1_epi16(0x7e00));
    } else {
      h = _mm512_slli_epi16(_mm512_cvtepu8_epi16(bytes), 8);
    }
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), factor));
    _mm512_storeu_ps(dst + 16,
                     _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), factor));
  }

  // 32 FP4 codes (16 bytes, code 2 i in the low nibble of byte i) times `factor`, into dst:
  // `table` holds the values of the 16 codes.
  static void fp4_block32(const uint8_t* p, F table, F factor, float* dst) {
    const __m512i bytes =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const F low = _mm512_permutexvar_ps(_mm512_and_si512(bytes, _mm512_set1_epi32(0xf)), table);
    const F high = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_permutex2var_ps(low, first, high), factor));
    _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_permutex2var_ps(low, second, high), factor));
  }

  // 32 FP6 codes (24 bytes, four codes in each 24-bit little-endian word) times `factor`, into
  // dst: `low` and `high` hold the values of codes 0..31 (sign bit 5 clear); the sign is the
  // code's bit 5.
  static void fp6_block32(const uint8_t* p, F low, F high, F factor, float* dst) {
    // 128-bit lane L of a half: the 24-bit word of its codes 4 L..4 L + 3 in every 32-bit lane,
    // shifted down by 6 times the code's place in the word.
    const __m512i word_bytes =
        _mm512_setr_epi32(0x80020100, 0x80020100, 0x80020100, 0x80020100, 0x80050403, 0x80050403,
                          0x80050403, 0x80050403, 0x80080706, 0x80080706, 0x80080706, 0x80080706,
                          0x800b0a09, 0x800b0a09, 0x800b0a09, 0x800b0a09);
    const __m512i shifts =
        _mm512_setr_epi32(0, 6, 12, 18, 0, 6, 12, 18, 0, 6, 12, 18, 0, 6, 12, 18);
    for (int half = 0; half < 2; ++half) {
      // Bytes 12 half .. 12 half + 11 (the 16 codes of this half), in every 128-bit lane.
      const __m512i bytes =
          _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8(__mmask16(0x0fff), p + 12 * half));
      const __m512i codes =
          _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi8(bytes, word_bytes), shifts),
                           _mm512_set1_epi32(0x3f));
      const F magnitude = _mm512_permutex2var_ps(low, codes, high);  // index bits 0..4
      // magnitude | (codes << 26 & sign bit)
      const F value = _mm512_castsi512_ps(
          _mm512_ternarylogic_epi32(_mm512_castps_si512(magnitude), _mm512_slli_epi32(codes, 26),
                                    _mm512_set1_epi32(int32_t(0x80000000u)), 0xf8));
      _mm512_storeu_ps(dst + 16 * half, _mm512_mul_ps(value, factor));
    }
  }
};

}  // namespace
}  // namespace mxattn::cpu::simd
