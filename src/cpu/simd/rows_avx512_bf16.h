// The scores of the few-row kernels as bf16 dot products (vdpbf16ps, AVX512-BF16) of bf16 query
// rows with bf16, E4M3 and E5M2 key rows: the AVX-512 VBMI set's reading of the rows, without
// widening anything to f32.
//
// A bf16 times a bf16 (or an FP8 value, exact in bf16) is exact in f32, and vdpbf16ps adds two
// such products to each f32 lane per instruction, so with the query as given (bf16, not yet
// multiplied by scale * log2(e), which multiplies the scores instead) a key costs half the
// multiply-add instructions of f32 FMA, with products as exact. On Zen 4 vdpbf16ps issues at the
// rate of an f32 FMA; the FP8 block scales, instead of one multiply per element, cost one multiply
// per key: every 32-bit lane holds elements of a single block, and the lanes are folded so that
// the block sums of all four query rows share one vector, multiplied by the key's four scales.
// vdpbf16ps treats bf16 subnormals as zero and flushes subnormal sums: the query's subnormal
// elements (below 2^-126) are dropped, an error far below the f32 tolerances.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/fast_kernels.h"
#include "cpu/simd/rows_avx512_vbmi.h"

namespace mxattn::cpu::simd {
namespace {

// Keys are read 128 elements (four blocks of 32) at a time, as four vectors of 32 words.
constexpr int64_t kDotChunk = 128;

[[gnu::always_inline]] inline __m512 dot_bf16(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// Contiguous bf16 key rows, in their natural order.
class Bf16DotRows {
 public:
  static constexpr bool kScaled = false;
  explicit Bf16DotRows(const RowFormat& f) : width_(f.width) {}
  int64_t width() const { return width_; }
  int64_t row_bytes() const { return width_ * 2; }

  // w[t] = elements [d + 32 t, d + 32 t + 32), zero past the width.
  [[gnu::always_inline]] void read(const RowSource& row, int64_t d, __m512i* w) const {
    const uint16_t* data = reinterpret_cast<const uint16_t*>(row.data) + d;
    const int64_t left = width_ - d;
    if (left >= kDotChunk) {
      for (int t = 0; t < 4; ++t) w[t] = _mm512_loadu_si512(data + 32 * t);
      return;
    }
    for (int t = 0; t < 4; ++t) {
      const int64_t n = left - 32 * t;
      const __mmask32 mask = n >= 32 ? ~__mmask32(0) : n > 0 ? __mmask32((1u << n) - 1) : 0;
      w[t] = _mm512_maskz_loadu_epi16(mask, data + 32 * t);
    }
  }

 private:
  int64_t width_;
};

// FP8 key rows, MX blocks along the row. Their words are ordered so that 32-bit lane 4 q + j of
// every vector holds elements of block q of the chunk: vector t, quarter q, word i is element
// 32 q + 8 t + i (bf16_dot_position in fast_rows.h, which packs the queries the same way).
class Fp8DotRows {
 public:
  static constexpr bool kScaled = true;
  explicit Fp8DotRows(const RowFormat& f)
      : low_first_(_mm512_loadu_si512(f.code_bf16_bytes)),
        low_second_(_mm512_loadu_si512(f.code_bf16_bytes + 64)),
        high_first_(_mm512_loadu_si512(f.code_bf16_bytes + 128)),
        high_second_(_mm512_loadu_si512(f.code_bf16_bytes + 192)),
        first_half_(chunk_order(0)),
        second_half_(chunk_order(16)),
        width_(f.width),
        scale_step_(f.scale_step),
        scale_values_(f.scale_values) {}
  int64_t width() const { return width_; }
  int64_t row_bytes() const { return width_; }

  // The words of elements [d, d + 128) in the order above, zero past the width.
  [[gnu::always_inline]] void read(const RowSource& row, int64_t d, __m512i* w) const {
    const uint8_t* codes = row.data + d;
    const int64_t left = width_ - d;
    __m512i first, second;
    if (left >= kDotChunk) {
      first = _mm512_loadu_si512(codes);
      second = _mm512_loadu_si512(codes + 64);
    } else {
      first = _mm512_maskz_loadu_epi8(byte_mask(left), codes);
      second = _mm512_maskz_loadu_epi8(byte_mask(left - 64), codes + 64);
    }
    // Quarter q of `low_words` holds elements 32 q + [0, 16) (vectors 0 and 1 once unpacked),
    // of `high_words` 32 q + [16, 32) (vectors 2 and 3).
    to_words(_mm512_permutex2var_epi8(first, first_half_, second), w);
    to_words(_mm512_permutex2var_epi8(first, second_half_, second), w + 2);
  }

  // The scales of the chunk's blocks: lane 4 q + j holds block q's (1 past the width).
  [[gnu::always_inline]] __m512 scales(const RowSource& row, int64_t d) const {
    const uint8_t* at = row.scales + d / 32 * scale_step_;
    const int64_t blocks = (width_ - d) / 32;
    uint32_t bytes = 0x7f7f7f7fu;  // 2^0
    if (blocks >= 4 && scale_step_ == 1) {
      std::memcpy(&bytes, at, 4);
    } else {
      for (int64_t b = 0; b < 4 && b < blocks; ++b) {
        bytes = (bytes & ~(0xffu << (8 * b))) | uint32_t(at[b * scale_step_]) << (8 * b);
      }
    }
    // E8M0 byte e is the f32 with exponent field e, 2^(e - 127), except 0 (2^-127, subnormal in
    // f32) and 0xFF (NaN): those take the table.
    const uint32_t has_zero = (bytes - 0x01010101u) & ~bytes & 0x80808080u;
    const uint32_t has_ff = (~bytes - 0x01010101u) & bytes & 0x80808080u;
    if ((has_zero | has_ff) == 0) {
      // Byte q to the top byte of the lanes of quarter q (the others zero), then down one bit:
      // e << 23.
      const __m512i spread =
          _mm512_shuffle_epi8(_mm512_set1_epi32(int32_t(bytes)), top_byte_by_quarter());
      return _mm512_castsi512_ps(_mm512_srli_epi32(spread, 1));
    }
    const __m128 values =
        _mm_setr_ps(scale_values_[bytes & 0xff], scale_values_[(bytes >> 8) & 0xff],
                    scale_values_[(bytes >> 16) & 0xff], scale_values_[bytes >> 24]);
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 _mm512_castps128_ps512(values));
  }

 private:
  static __mmask64 byte_mask(int64_t n) {
    return n >= 64 ? ~__mmask64(0) : n > 0 ? (__mmask64(1) << n) - 1 : 0;
  }
  // The vpshufb control of `scales`: in the lanes of quarter q, byte q to the top byte, zeros
  // (0x80) below it.
  static __m512i top_byte_by_quarter() {
    const int32_t q0 = 0x00808080, q1 = 0x01808080, q2 = 0x02808080, q3 = 0x03808080;
    return _mm512_setr_epi32(q0, q0, q0, q0, q1, q1, q1, q1, q2, q2, q2, q2, q3, q3, q3, q3);
  }
  // vpermt2b positions (0..127 over the chunk's two code vectors): quarter q takes elements
  // 32 q + offset + [0, 16).
  static __m512i chunk_order(int offset) {
    alignas(64) uint8_t at[64];
    for (int q = 0; q < 4; ++q) {
      for (int i = 0; i < 16; ++i) at[16 * q + i] = uint8_t(32 * q + offset + i);
    }
    return _mm512_load_si512(at);
  }
  // 64 codes (16 per quarter) to bf16 words: the first 8 of each quarter in w[0], the last 8 in
  // w[1]. The tables index by the magnitude (vpermt2b reads 7 index bits); the sign is the code's.
  [[gnu::always_inline]] void to_words(__m512i codes, __m512i* w) const {
    const __m512i low = _mm512_permutex2var_epi8(low_first_, codes, low_second_);
    const __m512i magnitude_high = _mm512_permutex2var_epi8(high_first_, codes, high_second_);
    // magnitude_high | (codes & 0x80)
    const __m512i high =
        _mm512_ternarylogic_epi32(magnitude_high, codes, _mm512_set1_epi8(char(0x80)), 0xf8);
    w[0] = _mm512_unpacklo_epi8(low, high);
    w[1] = _mm512_unpackhi_epi8(low, high);
  }

  __m512i low_first_, low_second_, high_first_, high_second_;
  __m512i first_half_, second_half_;
  int64_t width_, scale_step_;
  const float* scale_values_;
};

// Four row accumulators folded within each quarter: lane 4 q + r holds the sum of quarter q of
// row r's accumulator (one block of the chunk, for FP8 keys). The same shuffles as the VBMI set's
// last fold of four keys (rows_avx512_vbmi.h).
[[gnu::always_inline]] inline __m512 fold_quarters(const __m512* a) {
  return finish_folds(a);
}

// The quarter folds of 4 keys summed over their quarters, by row: lane 4 r + j is the dot
// product of key j with row r (the VBMI set's row fold, which leaves lane 4 j + r, then a
// transpose of the 4 x 4 lanes).
[[gnu::always_inline]] inline __m512 finish_quarters(const __m512* u) {
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), fold_rows(u));
}

// Scores of 4 query rows (q: bf16 [4][q_stride], 64-byte aligned, in the rows' word order) against
// every key, times `factor`: two keys at a time, each query vector loaded once for both.
template <class Rows>
void dot_rows4(const Rows& rows, const RowStream& s, const uint16_t* q, int64_t q_stride,
               float factor, float* scores, int64_t ld) {
  const int64_t width = rows.width();
  __m512 folds[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
  for (int64_t k = 0; k < s.count; k += 2) {
    const auto [row_a, row_b] = key_pair(s, k, rows.row_bytes());
    __m512 acc[8];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    __m512 sum_a = _mm512_setzero_ps(), sum_b = _mm512_setzero_ps();
    for (int64_t d = 0; d < width; d += kDotChunk) {
      __m512i key_a[4], key_b[4];
      rows.read(row_a, d, key_a);
      rows.read(row_b, d, key_b);
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m512i qv = _mm512_load_si512(q + r * q_stride + d + 32 * t);
          acc[r] = dot_bf16(acc[r], qv, key_a[t]);
          acc[4 + r] = dot_bf16(acc[4 + r], qv, key_b[t]);
        }
      }
      if constexpr (Rows::kScaled) {
        // Each block's sums times its scale, chunk by chunk.
        sum_a = _mm512_fmadd_ps(fold_quarters(acc), rows.scales(row_a, d), sum_a);
        sum_b = _mm512_fmadd_ps(fold_quarters(acc + 4), rows.scales(row_b, d), sum_b);
        for (__m512& a : acc) a = _mm512_setzero_ps();
      }
    }
    if constexpr (!Rows::kScaled) {
      sum_a = fold_quarters(acc);
      sum_b = fold_quarters(acc + 4);
    }
    const int64_t j = k % 4;
    folds[j] = sum_a;
    folds[j + 1] = sum_b;
    if (j == 0 && k + 2 < s.count) continue;
    // Past the last key, earlier folds (or zeros): finished, never stored.
    const __m512 sums = _mm512_mul_ps(finish_quarters(folds), _mm512_set1_ps(factor));
    const int64_t k0 = k - j;
    store_four_keys(sums, s.count - k0, scores + k0, ld);
  }
}

// dot_rows4 for rows of at most kDotChunk elements, the 4 x 4 query vectors held in registers
// for every key: on Zen 4 dot products fed by 512-bit loads ran at half the rate of ones fed from
// registers, so dot_rows4's query loads (one for every two dot products) bound it
// (docs/design.md).
template <class Rows>
void dot_rows4_held(const Rows& rows, const RowStream& s, const uint16_t* q, int64_t q_stride,
                    float factor, float* scores, int64_t ld) {
  __m512i qv[4][4];
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < 4; ++t) qv[r][t] = _mm512_load_si512(q + r * q_stride + 32 * t);
  }
  __m512 folds[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
  for (int64_t k = 0; k < s.count; ++k) {
    prefetch_next(s, k, rows.row_bytes());
    const RowSource& row = s.rows[k * s.step];
    __m512i key[4];
    rows.read(row, 0, key);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      acc[r] = dot_bf16(_mm512_setzero_ps(), qv[r][0], key[0]);
#pragma GCC unroll 4
      for (int t = 1; t < 4; ++t) acc[r] = dot_bf16(acc[r], qv[r][t], key[t]);
    }
    const int64_t j = k % 4;
    if constexpr (Rows::kScaled) {
      folds[j] = _mm512_mul_ps(fold_quarters(acc), rows.scales(row, 0));
    } else {
      folds[j] = fold_quarters(acc);
    }
    if (j < 3 && k + 1 < s.count) continue;
    // Past the last key, earlier folds (or zeros): finished, never stored.
    const __m512 sums = _mm512_mul_ps(finish_quarters(folds), _mm512_set1_ps(factor));
    const int64_t k0 = k - j;
    store_four_keys(sums, s.count - k0, scores + k0, ld);
  }
}

template <class Rows>
void dots_with(const Rows& rows, const RowStream& stream, const uint16_t* q, int64_t q_stride,
               int64_t query_rows, float factor, float* scores, int64_t ld) {
  RowStream s = stream;
  for (int64_t r0 = 0; r0 < query_rows; r0 += 4, s.next_count = 0) {
    if (rows.width() <= kDotChunk) {
      dot_rows4_held(rows, s, q + r0 * q_stride, q_stride, factor, scores + r0 * ld, ld);
    } else {
      dot_rows4(rows, s, q + r0 * q_stride, q_stride, factor, scores + r0 * ld, ld);
    }
  }
}

void scores_bf16_from_rows(const RowFormat& f, const RowStream& keys, const uint16_t* q,
                           int64_t q_stride, int64_t query_rows, float factor, float* scores,
                           int64_t ld) {
  if (f.elem == RowElem::bf16) {
    dots_with(Bf16DotRows(f), keys, q, q_stride, query_rows, factor, scores, ld);
  } else {
    dots_with(Fp8DotRows(f), keys, q, q_stride, query_rows, factor, scores, ld);
  }
}

}  // namespace
}  // namespace mxattn::cpu::simd
