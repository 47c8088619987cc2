// The many-row kernels of the AMX set: Q K^T and P V on the tile unit (TDPBF16PS: bf16 products
// summed in f32), the online softmax between them on AVX-512.
//
// Q, K and V are bf16, so their products are exact in f32 and the scores are as accurate as the
// f32 kernels'. The weights P are f32 values in [0, 1]: rounded to bf16 they would lose 8 bits, so
// each is split into a bf16 high part and a bf16 low part (the rounding error of the high part)
// and both are multiplied with V, which keeps 16 bits of every weight for twice the P V work.
//
// Tiles: 0-3 accumulate (16 x 16 f32 each, a 2 x 2 block), 4-5 hold the A operand (16 rows x 32
// bf16), 6-7 the B operand (16 pairs of rows x 16 columns of bf16 pairs). One shape for all eight.
#pragma once

#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <initializer_list>

#include "cpu/fast_kernels.h"
#include "cpu/simd/ops_avx512.h"

namespace mxattn::cpu::simd {
namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kTileBf16 = 32;  // bf16 per 64-byte tile row
constexpr int64_t kBlockRows = 2 * kTileRows;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig all_tiles_16x64() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.bytes_per_row[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

constexpr TileConfig kTileConfig = all_tiles_16x64();

int64_t round_up32(int64_t x) {
  return (x + 31) / 32 * 32;
}

// Elements [d, d + 32) of a bf16 row of `width` elements `stride` apart, zero past the width.
[[gnu::always_inline]] inline __m512i load_bf16_32(const RowFormat& f, const RowSource& row,
                                                   int64_t d) {
  const uint16_t* data = reinterpret_cast<const uint16_t*>(row.data);
  const int64_t left = f.width - d;
  if (left <= 0) return _mm512_setzero_si512();
  if (f.elem_stride == 1) {
    const __mmask32 mask = left >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << left) - 1);
    return _mm512_maskz_loadu_epi16(mask, data + d);
  }
  alignas(64) uint16_t gathered[32] = {};
  for (int64_t i = 0; i < 32 && i < left; ++i) gathered[i] = data[(d + i) * f.elem_stride];
  return _mm512_load_si512(gathered);
}

// r[i] <- lane i of every r[j], 16 x 16 32-bit elements: pairs, then quads within 128-bit lanes,
// then the lanes themselves.
[[gnu::always_inline]] inline void transpose16x16(__m512i* r) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + j], 128-bit lane L: element 4L + j of rows 4i .. 4i + 3.
  __m512i u[16];
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i even_a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i odd_a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
    const __m512i even_b = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i odd_b = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_shuffle_i32x4(even_a, even_b, 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(even_a, even_b, 0xdd);
    r[4 + j] = _mm512_shuffle_i32x4(odd_a, odd_b, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(odd_a, odd_b, 0xdd);
  }
}

// 16 keys by 32 elements at a time: each key's 16 element pairs become a column.
void pack_bf16_keys(const RowFormat& f, const RowSource* rows, int64_t step, int64_t count,
                    int64_t keys_padded, int64_t dim_padded, uint32_t* dst) {
  const int64_t keys_used = round_up32(count);
  for (int64_t k0 = 0; k0 < keys_used; k0 += 16) {
    for (int64_t d = 0; d < dim_padded; d += kTileBf16) {
      __m512i r[16];
      for (int64_t k = 0; k < 16; ++k) {
        r[k] = k0 + k < count ? load_bf16_32(f, rows[(k0 + k) * step], d) : _mm512_setzero_si512();
      }
      transpose16x16(r);
      for (int64_t pair = 0; pair < 16; ++pair) {
        _mm512_storeu_si512(dst + (d / 2 + pair) * keys_padded + k0, r[pair]);
      }
    }
  }
}

// Word positions for vpermt2w: elements 0..15 of the first operand alternating with those of the
// second (indices 32 and up).
struct WordOrder {
  alignas(64) uint16_t at[32];
};

constexpr WordOrder interleave_halves() {
  WordOrder o{};
  for (int i = 0; i < 16; ++i) {
    o.at[2 * i] = uint16_t(i);
    o.at[2 * i + 1] = uint16_t(32 + i);
  }
  return o;
}

constexpr WordOrder kInterleave = interleave_halves();

// Two keys at a time: their elements interleaved.
void pack_bf16_values(const RowFormat& f, const RowSource* rows, int64_t step, int64_t count,
                      int64_t dim_padded, uint32_t* dst) {
  const __m512i first_half = _mm512_load_si512(kInterleave.at);
  const __m512i second_half = _mm512_add_epi16(first_half, _mm512_set1_epi16(16));
  const int64_t keys_used = round_up32(count);
  for (int64_t k = 0; k < keys_used; k += 2) {
    uint32_t* out = dst + (k / 2) * dim_padded;
    for (int64_t d = 0; d < dim_padded; d += kTileBf16) {
      const __m512i a = k < count ? load_bf16_32(f, rows[k * step], d) : _mm512_setzero_si512();
      const __m512i b =
          k + 1 < count ? load_bf16_32(f, rows[(k + 1) * step], d) : _mm512_setzero_si512();
      _mm512_storeu_si512(out + d, _mm512_permutex2var_epi16(a, first_half, b));
      _mm512_storeu_si512(out + d + 16, _mm512_permutex2var_epi16(a, second_half, b));
    }
  }
}

// Scores of RB blocks of 16 rows (from row r0) against the keys, into s.scores.
template <int RB>
void block_scores(const Bf16TileStep& s, int64_t r0, int64_t keys_used) {
  const uint16_t* q = s.q + r0 * s.q_stride;
  const int64_t q_bytes = s.q_stride * 2, key_bytes = s.keys_padded * 4;
  const int64_t score_bytes = s.keys_padded * 4;
  for (int64_t k0 = 0; k0 < keys_used; k0 += 32) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (RB == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
    for (int64_t d = 0; d < s.dim_qk_padded; d += kTileBf16) {
      const uint32_t* keys = s.keys + (d / 2) * s.keys_padded + k0;
      _tile_loadd(4, q + d, q_bytes);
      _tile_loadd(6, keys, key_bytes);
      _tile_loadd(7, keys + 16, key_bytes);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if constexpr (RB == 2) {
        _tile_loadd(5, q + kTileRows * s.q_stride + d, q_bytes);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    float* out = s.scores + k0;
    _tile_stored(0, out, score_bytes);
    _tile_stored(1, out + 16, score_bytes);
    if constexpr (RB == 2) {
      _tile_stored(2, out + kTileRows * s.keys_padded, score_bytes);
      _tile_stored(3, out + kTileRows * s.keys_padded + 16, score_bytes);
    }
  }
}

// Keys [k, k + 16) of row `row` that take part: below the key count and, with a mask, within
// [first, last] of the row.
[[gnu::always_inline]] inline __mmask16 visible_keys(const Bf16TileStep& s, int64_t row,
                                                     int64_t k) {
  const int64_t left = s.key_count - k;
  const __mmask16 valid = left >= 16 ? __mmask16(0xffff)
                          : left > 0 ? __mmask16((1u << left) - 1)
                                     : __mmask16(0);
  if (!s.first) return valid;
  const __m512 key =
      _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                    _mm512_set1_ps(float(k)));
  return valid & _mm512_cmp_ps_mask(key, _mm512_set1_ps(s.first[row]), _CMP_GE_OQ) &
         _mm512_cmp_ps_mask(key, _mm512_set1_ps(s.last[row]), _CMP_LE_OQ);
}

// 16 f32 weights as a bf16 high part (truncated, so that p - high is exact) and the bf16 rounding
// of the rest.
[[gnu::always_inline]] inline void split_weights(__m512 p, __m512* high, __m512* low) {
  *high = _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(p), _mm512_set1_epi32(int32_t(0xffff0000u))));
  *low = _mm512_sub_ps(p, *high);
}

// The online softmax step of the 16 rows [r0, r0 + 16) (softmax_step's), whose scores are
// s.scores rows [local0, local0 + 16), leaving the weights as high and low bf16 parts, zero past
// the last key. The scale (never negative: the engine negates Q instead) is applied in the
// exponent, s * scale - max, so the maximum is taken over the raw scores: scaling by a
// non-negative number keeps their order. The rows' maxima and sums are folded 16 at a time, so
// the per-row bookkeeping is a few vector operations for all of them.
void softmax16(const Bf16TileStep& s, int64_t r0, int64_t local0, int64_t keys_used) {
  using Ops = Avx512;
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 scale = _mm512_set1_ps(s.score_scale);
  const bool full = !s.first && s.key_count == keys_used;
  __m512 per_row[16];
  for (int64_t r = 0; r < 16; ++r) {
    const float* scores = s.scores + (local0 + r) * s.keys_padded;
    __m512 max = minus_inf;
    if (full) {
      for (int64_t k = 0; k < keys_used; k += 16) max = Ops::max(max, _mm512_loadu_ps(scores + k));
    } else {
      for (int64_t k = 0; k < keys_used; k += 16) {
        max = _mm512_mask_max_ps(max, visible_keys(s, r0 + r, k), _mm512_loadu_ps(scores + k), max);
      }
    }
    per_row[r] = max;
  }
  const __m512 tile_max = _mm512_mul_ps(
      Ops::fold_lanes(per_row, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); }), scale);
  const __m512 old_max = _mm512_loadu_ps(s.row_max + r0);
  const __m512 new_max =
      _mm512_mask_mov_ps(old_max, _mm512_cmp_ps_mask(old_max, tile_max, _CMP_LT_OQ), tile_max);
  // A row with no visible key so far keeps max -inf; subtracting 0 instead keeps its weights 0.
  const __m512 shift = Ops::zero_if_neg_inf(new_max);
  const __m512 factor = Ops::exp2(_mm512_sub_ps(old_max, shift));
  alignas(64) float shifts[16];
  _mm512_store_ps(shifts, shift);
  for (int64_t r = 0; r < 16; ++r) {
    const float* scores = s.scores + (local0 + r) * s.keys_padded;
    uint16_t* high = s.weights_high + (local0 + r) * s.keys_padded;
    uint16_t* low = s.weights_low + (local0 + r) * s.keys_padded;
    const __m512 row_shift = _mm512_set1_ps(shifts[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t k = 0; k < keys_used; k += 32) {
      __m512 p0 = Ops::exp2(_mm512_fmsub_ps(_mm512_loadu_ps(scores + k), scale, row_shift));
      __m512 p1 = Ops::exp2(_mm512_fmsub_ps(_mm512_loadu_ps(scores + k + 16), scale, row_shift));
      if (!full) {
        p0 = _mm512_maskz_mov_ps(visible_keys(s, r0 + r, k), p0);
        p1 = _mm512_maskz_mov_ps(visible_keys(s, r0 + r, k + 16), p1);
      }
      sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
      __m512 high0, low0, high1, low1;
      split_weights(p0, &high0, &low0);
      split_weights(p1, &high1, &low1);
      _mm512_storeu_si512(high + k, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(high1, high0)));
      _mm512_storeu_si512(low + k, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(low1, low0)));
    }
    per_row[r] = sum;
  }
  _mm512_storeu_ps(s.row_sum + r0, _mm512_fmadd_ps(_mm512_loadu_ps(s.row_sum + r0), factor,
                                                   Ops::reduce_lanes(per_row)));
  _mm512_storeu_ps(s.row_max + r0, new_max);
  _mm512_storeu_ps(s.rescale + r0, factor);
}

// out rows [r0, r0 + 16 RB) = rescale * out + P V, 32 columns at a time, accumulated in the tiles.
template <int RB>
void block_values(const Bf16TileStep& s, int64_t r0, int64_t keys_used) {
  for (int64_t r = r0; r < r0 + RB * kTileRows; ++r) {
    const float factor = s.rescale[r];
    if (factor == 1.0f) continue;  // x * 1 is x: skipping it changes no bit
    float* o = s.out + r * s.out_stride;
    const __m512 f = _mm512_set1_ps(factor);
    for (int64_t d = 0; d < s.dim_v_padded; d += 16) {
      _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), f));
    }
  }
  const int64_t out_bytes = s.out_stride * 4, value_bytes = s.dim_v_padded * 4;
  const int64_t weight_bytes = s.keys_padded * 2;
  const int64_t second_weights = kTileRows * s.keys_padded;
  for (int64_t c = 0; c < s.dim_v_padded; c += 32) {
    float* out = s.out + r0 * s.out_stride + c;
    _tile_loadd(0, out, out_bytes);
    _tile_loadd(1, out + 16, out_bytes);
    if constexpr (RB == 2) {
      _tile_loadd(2, out + kTileRows * s.out_stride, out_bytes);
      _tile_loadd(3, out + kTileRows * s.out_stride + 16, out_bytes);
    }
    for (int64_t k = 0; k < keys_used; k += 32) {
      const uint32_t* values = s.values + (k / 2) * s.dim_v_padded + c;
      _tile_loadd(6, values, value_bytes);
      _tile_loadd(7, values + 16, value_bytes);
      // The weights' high bf16 part, then their low part, each times V into the same sums.
      for (const uint16_t* weights : {s.weights_high + k, s.weights_low + k}) {
        _tile_loadd(4, weights, weight_bytes);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if constexpr (RB == 2) {
          _tile_loadd(5, weights + second_weights, weight_bytes);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
      }
    }
    _tile_stored(0, out, out_bytes);
    _tile_stored(1, out + 16, out_bytes);
    if constexpr (RB == 2) {
      _tile_stored(2, out + kTileRows * s.out_stride, out_bytes);
      _tile_stored(3, out + kTileRows * s.out_stride + 16, out_bytes);
    }
  }
}

template <int RB>
void attend_block(const Bf16TileStep& s, int64_t r0, int64_t keys_used) {
  block_scores<RB>(s, r0, keys_used);
  for (int64_t g = 0; g < RB; ++g) softmax16(s, r0 + g * kTileRows, g * kTileRows, keys_used);
  block_values<RB>(s, r0, keys_used);
}

// Row blocks of 32 (one of 16 last where the count asks), each through scores, softmax and
// values while its scores are still in the L1 cache.
void attend_bf16(const Bf16TileStep& s) {
  const int64_t keys_used = round_up32(s.key_count);
  _tile_loadconfig(&kTileConfig);
  int64_t r0 = 0;
  for (; r0 + kBlockRows <= s.row_count; r0 += kBlockRows) attend_block<2>(s, r0, keys_used);
  if (r0 < s.row_count) attend_block<1>(s, r0, keys_used);
  _tile_release();
}

}  // namespace
}  // namespace mxattn::cpu::simd
