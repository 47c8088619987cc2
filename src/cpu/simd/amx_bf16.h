// The many-row kernels of the AMX set: Q K^T and P V on the tile unit (TDPBF16PS: bf16 products
// summed in f32), the online softmax between them on AVX-512.
//
// bf16 operands go to the tile unit as they are, f32 and f16 ones as sums of bf16 parts (see
// Bf16TileStep in fast_kernels.h): a product of two operands is the sum of the products of their
// parts down to 2^-24, so the scores are as accurate as the f32 kernels'. The weights P are f32
// values in [0, 1]: rounded to bf16 they would lose 8 bits, so they too are split, into 2 parts
// (16 bits) against bf16 values and 3 (all 24) against f32 and f16 values, unless the caller's O
// is bf16 (1 part, as GPU kernels keep P) or f16 (2 parts): the engine picks the count.
//
// Tiles: 0-3 accumulate (16 x 16 f32 each, a 2 x 2 block), 4-5 hold the A operand (16 rows x 32
// bf16), 6-7 the B operand (16 pairs of rows x 16 columns of bf16 pairs). One shape for all eight.
// The kernels are written over a `Tiles` type: HardwareTiles, the tile unit's instructions, or
// EmulatedTiles, the same operations in AVX-512 for testing on CPUs without the unit.
#pragma once

#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "cpu/fast_kernels.h"
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_avx512.h"
#include "cpu/simd/rows_avx512_vbmi.h"

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

// The operations the kernels use, tile numbers as template arguments: zero, load and store tile
// T, and dot<C>, accumulator C += A B^T as TDPBF16PS computes it, with A tile 4 + C / 2 and B
// tile 6 + C % 2 (the 2 x 2 block of accumulators 0-3).
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
struct HardwareTiles {
  // The configuration loaded on this thread (palette 0: none). The few-row kernel keeps its own
  // loaded between calls (configure), which costs about 70 ns a load on Sapphire Rapids.
  static TileConfig& live() {
    alignas(64) static thread_local TileConfig c{.palette = 0};
    return c;
  }
  static void begin() { configure(kTileConfig); }
  static void end() {
    _tile_release();
    live().palette = 0;
  }
  static void configure(const TileConfig& c) {
    if (std::memcmp(&live(), &c, sizeof(TileConfig)) == 0) return;
    _tile_loadconfig(&c);
    live() = c;
  }
  static void release() {
    if (live().palette != 0) end();
  }
  template <int T>
  static void zero() {
    static_assert(T >= 0 && T < 8);
    if constexpr (T == 0) _tile_zero(0);
    if constexpr (T == 1) _tile_zero(1);
    if constexpr (T == 2) _tile_zero(2);
    if constexpr (T == 3) _tile_zero(3);
    if constexpr (T == 4) _tile_zero(4);
    if constexpr (T == 5) _tile_zero(5);
    if constexpr (T == 6) _tile_zero(6);
    if constexpr (T == 7) _tile_zero(7);
  }
  template <int T>
  static void load(const void* p, int64_t stride) {
    static_assert(T >= 0 && T < 8);
    // The instruction's asm names no memory it reads: stores before it must stay before it.
    __asm__ volatile("" ::: "memory");
    if constexpr (T == 0) _tile_loadd(0, p, stride);
    if constexpr (T == 1) _tile_loadd(1, p, stride);
    if constexpr (T == 2) _tile_loadd(2, p, stride);
    if constexpr (T == 3) _tile_loadd(3, p, stride);
    if constexpr (T == 4) _tile_loadd(4, p, stride);
    if constexpr (T == 5) _tile_loadd(5, p, stride);
    if constexpr (T == 6) _tile_loadd(6, p, stride);
    if constexpr (T == 7) _tile_loadd(7, p, stride);
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    static_assert(T >= 0 && T < 8);
    if constexpr (T == 0) _tile_stored(0, p, stride);
    if constexpr (T == 1) _tile_stored(1, p, stride);
    if constexpr (T == 2) _tile_stored(2, p, stride);
    if constexpr (T == 3) _tile_stored(3, p, stride);
    if constexpr (T == 4) _tile_stored(4, p, stride);
    if constexpr (T == 5) _tile_stored(5, p, stride);
    if constexpr (T == 6) _tile_stored(6, p, stride);
    if constexpr (T == 7) _tile_stored(7, p, stride);
    // Nor does it name the memory it writes: loads after it must stay after it.
    __asm__ volatile("" ::: "memory");
  }
  // Tile C += A B^T (TDPBF16PS), any three distinct tiles.
  template <int C, int A, int B>
  static void dot_of() {
    static_assert(C >= 0 && C < 8 && A >= 0 && A < 8 && B >= 0 && B < 8);
    __asm__ volatile(
        "{tdpbf16ps %%tmm%c[b], %%tmm%c[a], %%tmm%c[c]|tdpbf16ps %%tmm%c[c], %%tmm%c[a], "
        "%%tmm%c[b]}" ::[a] "i"(A),
        [b] "i"(B), [c] "i"(C));
  }
  template <int C>
  static void dot() {
    static_assert(C >= 0 && C < 4);
    dot_of<C, 4 + C / 2, 6 + C % 2>();
  }
};
#endif

// The same operations on eight 16 x 64-byte tiles in memory (one set per thread). dot sums each
// row's pairs in order: for each pair k, C += A[2k] B[2k], then C += A[2k+1] B[2k+1], in f32 (bf16
// products are exact in f32). The unit rounds its sums otherwise (on the development machine's
// Sapphire Rapids none of sequential, pairwise or exact-then-rounded sums matched it bit for bit),
// reads bf16 subnormals as zero and flushes subnormal sums, so the two agree to f32 rounding, not
// bit for bit: the tests hold both to the reference's tolerance.
struct EmulatedTiles {
  struct alignas(64) Tile {
    uint32_t row[16][16];
  };
  static Tile* tiles() {
    alignas(64) static thread_local Tile t[8];
    return t;
  }
  static TileConfig& config() {
    alignas(64) static thread_local TileConfig c = kTileConfig;
    return c;
  }
  static void begin() { config() = kTileConfig; }
  static void end() {}
  static void configure(const TileConfig& c) { config() = c; }
  static void release() {}
  template <int T>
  static void zero() {
    std::memset(&tiles()[T], 0, sizeof(Tile));
  }
  // The configured rows and bytes of each row; the rest of the tile zero.
  template <int T>
  static void load(const void* p, int64_t stride) {
    std::memset(&tiles()[T], 0, sizeof(Tile));
    for (int r = 0; r < config().rows[T]; ++r) {
      std::memcpy(tiles()[T].row[r], static_cast<const char*>(p) + r * stride,
                  config().bytes_per_row[T]);
    }
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    for (int r = 0; r < config().rows[T]; ++r) {
      std::memcpy(static_cast<char*>(p) + r * stride, tiles()[T].row[r], config().bytes_per_row[T]);
    }
  }
  template <int C, int A, int B>
  static void dot_of() {
    const Tile& a = tiles()[A];
    const Tile& b = tiles()[B];
    Tile& c = tiles()[C];
    for (int m = 0; m < 16; ++m) {
      __m512 sum = _mm512_castsi512_ps(_mm512_load_si512(c.row[m]));
      for (int k = 0; k < 16; ++k) {
        const __m512i pairs = _mm512_load_si512(b.row[k]);
        const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
        const __m512 odd =
            _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(int32_t(0xffff0000u))));
        const uint32_t a_pair = a.row[m][k];
        sum = _mm512_add_ps(
            sum, _mm512_mul_ps(_mm512_set1_ps(std::bit_cast<float>(a_pair << 16)), even));
        sum = _mm512_add_ps(
            sum, _mm512_mul_ps(_mm512_set1_ps(std::bit_cast<float>(a_pair & 0xffff0000u)), odd));
      }
      _mm512_store_si512(c.row[m], _mm512_castps_si512(sum));
    }
  }
  template <int C>
  static void dot() {
    dot_of<C, 4 + C / 2, 6 + C % 2>();
  }
};

int64_t round_up32(int64_t x) {
  return (x + 31) / 32 * 32;
}

// Elements [d, d + 32) of a 16-bit row of `width` elements `stride` apart, zero past the width.
[[gnu::always_inline]] inline __m512i load_16bit_32(const RowFormat& f, const RowSource& row,
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

// Elements [d, d + 32) of an f32, f16 or bf16 row as f32, zero past the width: [0] the first 16.
[[gnu::always_inline]] inline void load_f32_32(const RowFormat& f, const RowSource& row, int64_t d,
                                               __m512* x) {
  if (f.elem == RowElem::f32) {
    const float* data = reinterpret_cast<const float*>(row.data);
    const int64_t left = f.width - d;
    if (f.elem_stride == 1 && left >= 32) {
      x[0] = _mm512_loadu_ps(data + d);
      x[1] = _mm512_loadu_ps(data + d + 16);
      return;
    }
    alignas(64) float gathered[32] = {};
    for (int64_t i = 0; i < 32 && i < left; ++i) gathered[i] = data[(d + i) * f.elem_stride];
    x[0] = _mm512_load_ps(gathered);
    x[1] = _mm512_load_ps(gathered + 16);
    return;
  }
  const __m512i h = load_16bit_32(f, row, d);
  if (f.elem == RowElem::f16) {
    x[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    x[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
    return;
  }
  x[0] =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
  x[1] = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
}

// x truncated to bf16 (low 16 bits cleared), as f32: x minus it is exact.
[[gnu::always_inline]] inline __m512 truncate_bf16(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(int32_t(0xffff0000u))));
}

// The `parts` bf16 parts of 32 f32 values x[0], x[1] (Bf16TileStep): all but the last truncated,
// the last rounded, each as 32 bf16 in element order.
[[gnu::always_inline]] inline void split_parts(const __m512* x, int parts, __m512i* out) {
  __m512 rest[2] = {x[0], x[1]};
  for (int i = 0; i < parts; ++i) {
    __m512 part[2] = {rest[0], rest[1]};
    if (i + 1 < parts) {
      for (int h = 0; h < 2; ++h) {
        part[h] = truncate_bf16(rest[h]);
        rest[h] = _mm512_sub_ps(rest[h], part[h]);
      }
    }
    out[i] = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(part[1], part[0]));
  }
}

// Elements [d, d + 32) of a row as `parts` bf16 parts: bf16 rows as they are.
[[gnu::always_inline]] inline void load_parts_32(const RowFormat& f, const RowSource& row,
                                                 int64_t d, int parts, __m512i* out) {
  if (f.elem == RowElem::bf16) {
    out[0] = load_16bit_32(f, row, d);
    for (int i = 1; i < parts; ++i) out[i] = _mm512_setzero_si512();
    return;
  }
  __m512 x[2];
  load_f32_32(f, row, d, x);
  split_parts(x, parts, out);
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

// 16 keys by 32 elements at a time: each key's 16 element pairs become a column, part by part.
void pack_bf16_keys(const RowFormat& f, const RowSource* rows, int64_t step, int64_t count,
                    int64_t keys_padded, int64_t dim_padded, int parts, uint32_t* const* dst) {
  const int64_t keys_used = round_up32(count);
  for (int64_t k0 = 0; k0 < keys_used; k0 += 16) {
    for (int64_t d = 0; d < dim_padded; d += kTileBf16) {
      __m512i r[kMaxBf16Parts][16];
      for (int64_t k = 0; k < 16; ++k) {
        __m512i split[kMaxBf16Parts];
        if (k0 + k < count) {
          load_parts_32(f, rows[(k0 + k) * step], d, parts, split);
        } else {
          for (int i = 0; i < parts; ++i) split[i] = _mm512_setzero_si512();
        }
        for (int i = 0; i < parts; ++i) r[i][k] = split[i];
      }
      for (int i = 0; i < parts; ++i) {
        transpose16x16(r[i]);
        for (int64_t pair = 0; pair < 16; ++pair) {
          _mm512_storeu_si512(dst[i] + (d / 2 + pair) * keys_padded + k0, r[i][pair]);
        }
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

// Two keys at a time: their elements interleaved, part by part.
void pack_bf16_values(const RowFormat& f, const RowSource* rows, int64_t step, int64_t count,
                      int64_t dim_padded, int parts, uint32_t* const* dst) {
  const __m512i first_half = _mm512_load_si512(kInterleave.at);
  const __m512i second_half = _mm512_add_epi16(first_half, _mm512_set1_epi16(16));
  const int64_t keys_used = round_up32(count);
  for (int64_t k = 0; k < keys_used; k += 2) {
    for (int64_t d = 0; d < dim_padded; d += kTileBf16) {
      __m512i a[kMaxBf16Parts], b[kMaxBf16Parts];
      for (int i = 0; i < parts; ++i) a[i] = b[i] = _mm512_setzero_si512();
      if (k < count) load_parts_32(f, rows[k * step], d, parts, a);
      if (k + 1 < count) load_parts_32(f, rows[(k + 1) * step], d, parts, b);
      for (int i = 0; i < parts; ++i) {
        uint32_t* out = dst[i] + (k / 2) * dim_padded + d;
        _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a[i], first_half, b[i]));
        _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi16(a[i], second_half, b[i]));
      }
    }
  }
}

// Scores of RB blocks of 16 rows (from row r0) against the keys, into s.scores: the products of
// Q part i and K part j with i + j <= kBf16PartLevels, large parts first.
template <class Tiles, int RB>
void block_scores(const Bf16TileStep& s, int64_t r0, int64_t keys_used) {
  const int64_t q_bytes = s.q_stride * 2, key_bytes = s.keys_padded * 4;
  const int64_t score_bytes = s.keys_padded * 4;
  for (int64_t k0 = 0; k0 < keys_used; k0 += 32) {
    Tiles::template zero<0>();
    Tiles::template zero<1>();
    if constexpr (RB == 2) {
      Tiles::template zero<2>();
      Tiles::template zero<3>();
    }
    for (int64_t d = 0; d < s.dim_qk_padded; d += kTileBf16) {
      for (int i = 0; i < s.q_parts; ++i) {
        const uint16_t* q = s.q[i] + r0 * s.q_stride + d;
        Tiles::template load<4>(q, q_bytes);
        if constexpr (RB == 2) Tiles::template load<5>(q + kTileRows * s.q_stride, q_bytes);
        for (int j = 0; j < s.key_parts && i + j <= kBf16PartLevels; ++j) {
          const uint32_t* keys = s.keys[j] + (d / 2) * s.keys_padded + k0;
          Tiles::template load<6>(keys, key_bytes);
          Tiles::template load<7>(keys + 16, key_bytes);
          Tiles::template dot<0>();
          Tiles::template dot<1>();
          if constexpr (RB == 2) {
            Tiles::template dot<2>();
            Tiles::template dot<3>();
          }
        }
      }
    }
    float* out = s.scores + k0;
    Tiles::template store<0>(out, score_bytes);
    Tiles::template store<1>(out + 16, score_bytes);
    if constexpr (RB == 2) {
      Tiles::template store<2>(out + kTileRows * s.keys_padded, score_bytes);
      Tiles::template store<3>(out + kTileRows * s.keys_padded + 16, score_bytes);
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

// The online softmax step of the 16 rows [r0, r0 + 16) (softmax_step's), whose scores are
// s.scores rows [local0, local0 + 16), leaving the weights as s.weight_parts bf16 parts, zero
// past the last key. The scale (never negative: the engine negates Q instead) is applied in the
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
  // Weights kept to 16 bits (2 parts) or fewer need no more than the degree-4 exponential's 2.7e-6.
  const bool short_exp = s.weight_parts <= 2;
  for (int64_t r = 0; r < 16; ++r) {
    const float* scores = s.scores + (local0 + r) * s.keys_padded;
    const int64_t at = (local0 + r) * s.keys_padded;
    const __m512 row_shift = _mm512_set1_ps(shifts[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t k = 0; k < keys_used; k += 32) {
      const __m512 x[2] = {_mm512_fmsub_ps(_mm512_loadu_ps(scores + k), scale, row_shift),
                           _mm512_fmsub_ps(_mm512_loadu_ps(scores + k + 16), scale, row_shift)};
      __m512 p[2];
      if (short_exp) {
        p[0] = Ops::exp2<4>(x[0]);
        p[1] = Ops::exp2<4>(x[1]);
      } else {
        p[0] = Ops::exp2(x[0]);
        p[1] = Ops::exp2(x[1]);
      }
      if (!full) {
        p[0] = _mm512_maskz_mov_ps(visible_keys(s, r0 + r, k), p[0]);
        p[1] = _mm512_maskz_mov_ps(visible_keys(s, r0 + r, k + 16), p[1]);
      }
      sum = _mm512_add_ps(sum, _mm512_add_ps(p[0], p[1]));
      __m512i parts[kMaxBf16Parts];
      split_parts(p, s.weight_parts, parts);
      for (int i = 0; i < s.weight_parts; ++i) _mm512_storeu_si512(s.weights[i] + at + k, parts[i]);
    }
    per_row[r] = sum;
  }
  _mm512_storeu_ps(s.row_sum + r0, _mm512_fmadd_ps(_mm512_loadu_ps(s.row_sum + r0), factor,
                                                   Ops::reduce_lanes(per_row)));
  _mm512_storeu_ps(s.row_max + r0, new_max);
  _mm512_storeu_ps(s.rescale + r0, factor);
}

// out rows [r0, r0 + 16 RB) = rescale * out + P V, 32 columns at a time, accumulated in the tiles:
// the products of V part j and weight part i with i + j <= kBf16PartLevels.
template <class Tiles, int RB>
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
    Tiles::template load<0>(out, out_bytes);
    Tiles::template load<1>(out + 16, out_bytes);
    if constexpr (RB == 2) {
      Tiles::template load<2>(out + kTileRows * s.out_stride, out_bytes);
      Tiles::template load<3>(out + kTileRows * s.out_stride + 16, out_bytes);
    }
    for (int64_t k = 0; k < keys_used; k += 32) {
      for (int j = 0; j < s.value_parts; ++j) {
        const uint32_t* values = s.values[j] + (k / 2) * s.dim_v_padded + c;
        Tiles::template load<6>(values, value_bytes);
        Tiles::template load<7>(values + 16, value_bytes);
        for (int i = 0; i < s.weight_parts && i + j <= kBf16PartLevels; ++i) {
          const uint16_t* weights = s.weights[i] + k;
          Tiles::template load<4>(weights, weight_bytes);
          Tiles::template dot<0>();
          Tiles::template dot<1>();
          if constexpr (RB == 2) {
            Tiles::template load<5>(weights + second_weights, weight_bytes);
            Tiles::template dot<2>();
            Tiles::template dot<3>();
          }
        }
      }
    }
    Tiles::template store<0>(out, out_bytes);
    Tiles::template store<1>(out + 16, out_bytes);
    if constexpr (RB == 2) {
      Tiles::template store<2>(out + kTileRows * s.out_stride, out_bytes);
      Tiles::template store<3>(out + kTileRows * s.out_stride + 16, out_bytes);
    }
  }
}

template <class Tiles, int RB>
void attend_block(const Bf16TileStep& s, int64_t r0, int64_t keys_used) {
  block_scores<Tiles, RB>(s, r0, keys_used);
  for (int64_t g = 0; g < RB; ++g) softmax16(s, r0 + g * kTileRows, g * kTileRows, keys_used);
  block_values<Tiles, RB>(s, r0, keys_used);
}

// Row blocks of 32 (one of 16 last where the count asks), each through scores, softmax and
// values while its scores are still in the L1 cache.
template <class Tiles>
void attend_bf16(const Bf16TileStep& s) {
  const int64_t keys_used = round_up32(s.key_count);
  Tiles::begin();
  int64_t r0 = 0;
  for (; r0 + kBlockRows <= s.row_count; r0 += kBlockRows) attend_block<Tiles, 2>(s, r0, keys_used);
  if (r0 < s.row_count) attend_block<Tiles, 1>(s, r0, keys_used);
  Tiles::end();
}

}  // namespace
}  // namespace mxattn::cpu::simd
