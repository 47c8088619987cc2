// The few-row kernels of the AVX-512 VBMI set: scores and values read straight from bf16, f16,
// E4M3 and E5M2 rows, with no f32 tile in between, so a key row costs a few register operations
// instead of an f32 round trip through the cache.
//
// A bf16 value is the top half of an f32, so 32 bf16 become two f32 vectors by a shift and a mask:
// the even elements, then the odd ones (f16 takes the same order: each half of the 32-bit lanes
// narrowed, then converted). Every row is read in that order, block of 32 by block of
// 32 (the queries and the output columns are permuted the same way), which costs nothing. FP8
// codes become bf16 first (every E4M3 and E5M2 value is exact in bf16) through two 128-entry byte
// tables (VBMI permutes). The arithmetic is f32 FMA, which takes f32 queries and weights; the
// avx512_bf16 set computes the scores of bf16 queries as bf16 dot products instead
// (rows_avx512_bf16.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/fast_kernels.h"
#include "cpu/simd/ops_avx512.h"

namespace mxattn::cpu::simd {
namespace {

// Byte positions for vpermb: where each of 64 codes must sit so that the byte unpacks that follow,
// which interleave within 128-bit lanes, leave codes 0..31 and 32..63 in order.
struct ByteOrder {
  alignas(64) uint8_t at[64];
};

constexpr ByteOrder natural_after_unpack() {
  ByteOrder o{};
  for (int lane = 0; lane < 4; ++lane) {
    for (int j = 0; j < 8; ++j) {
      o.at[16 * lane + j] = uint8_t(8 * lane + j);
      o.at[16 * lane + 8 + j] = uint8_t(32 + 8 * lane + j);
    }
  }
  return o;
}

constexpr ByteOrder kCodeOrder = natural_after_unpack();

// 32 bf16 (natural order) as f32: the even elements, then the odd ones.
[[gnu::always_inline]] inline void split_bf16(__m512i w, __m512* out) {
  out[0] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  out[1] = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int32_t(0xffff0000u))));
}

// 32 f16 (natural order) as f32, in split_bf16's order: the low halves of the 32-bit lanes (the
// even elements), then the high halves. The conversion is exact.
[[gnu::always_inline]] inline void split_f16(__m512i w, __m512* out) {
  out[0] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w));
  out[1] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w, 16)));
}

// FP8 codes to bf16, from RowFormat::code_bf16_bytes.
class Fp8Decoder {
 public:
  explicit Fp8Decoder(const uint8_t* bytes)
      : low_first_(_mm512_loadu_si512(bytes)),
        low_second_(_mm512_loadu_si512(bytes + 64)),
        high_first_(_mm512_loadu_si512(bytes + 128)),
        high_second_(_mm512_loadu_si512(bytes + 192)) {}

  // 64 codes as bf16: codes 0..31 in out[0], 32..63 in out[1].
  [[gnu::always_inline]] void to_bf16(__m512i codes, __m512i* out) const {
    __m512i magnitudes = _mm512_setzero_si512();
    placed_to_bf16(_mm512_permutexvar_epi8(_mm512_load_si512(kCodeOrder.at), codes), out,
                   magnitudes);
  }

  // Like to_bf16 for 64 codes already placed as kCodeOrder places them. `magnitudes` keeps the
  // bytewise maximum of the high bytes of the values' magnitudes: 0x7f where a code is NaN or Inf.
  [[gnu::always_inline]] void placed_to_bf16(__m512i placed, __m512i* out,
                                             __m512i& magnitudes) const {
    // The tables index by the magnitude (vpermt2b reads 7 index bits); the sign is the code's.
    const __m512i low = _mm512_permutex2var_epi8(low_first_, placed, low_second_);
    const __m512i magnitude_high = _mm512_permutex2var_epi8(high_first_, placed, high_second_);
    magnitudes = _mm512_max_epu8(magnitudes, magnitude_high);
    // magnitude_high | (placed & 0x80)
    const __m512i high =
        _mm512_ternarylogic_epi32(magnitude_high, placed, _mm512_set1_epi8(char(0x80)), 0xf8);
    out[0] = _mm512_unpacklo_epi8(low, high);
    out[1] = _mm512_unpackhi_epi8(low, high);
  }

 private:
  __m512i low_first_, low_second_, high_first_, high_second_;
};

// The rows below give a row's elements as f32 in even/odd order, 64 at a time: read_chunk for
// [d, d + 64) within the row, read_tail for the last width - d < 64 (four vectors, zero past the
// width).

// Contiguous 16-bit rows, bf16 or f16 (Split: split_bf16 or split_f16).
template <void (*Split)(__m512i, __m512*)>
class HalfRows {
 public:
  explicit HalfRows(const RowFormat& f) : width_(f.width) {}
  int64_t width() const { return width_; }
  int64_t row_bytes() const { return width_ * 2; }

  [[gnu::always_inline]] void read_chunk(const RowSource& row, int64_t d, __m512* out) const {
    const uint16_t* data = reinterpret_cast<const uint16_t*>(row.data) + d;
    Split(_mm512_loadu_si512(data), out);
    Split(_mm512_loadu_si512(data + 32), out + 2);
  }
  [[gnu::always_inline]] void read_tail(const RowSource& row, int64_t d, __m512* out) const {
    const uint16_t* data = reinterpret_cast<const uint16_t*>(row.data) + d;
    const int64_t left = width_ - d;
    const uint64_t mask = (uint64_t(1) << left) - 1;
    Split(_mm512_maskz_loadu_epi16(__mmask32(mask), data), out);
    Split(_mm512_maskz_loadu_epi16(__mmask32(mask >> 32), data + 32), out + 2);
  }

 private:
  int64_t width_;
};
using Bf16Rows = HalfRows<split_bf16>;
using F16Rows = HalfRows<split_f16>;

// bf16 rows with elements `stride` apart, gathered first.
class StridedBf16Rows {
 public:
  explicit StridedBf16Rows(const RowFormat& f) : width_(f.width), stride_(f.elem_stride) {}
  int64_t width() const { return width_; }
  int64_t row_bytes() const { return ((width_ - 1) * stride_ + 1) * 2; }

  void read_chunk(const RowSource& row, int64_t d, __m512* out) const { read_tail(row, d, out); }
  void read_tail(const RowSource& row, int64_t d, __m512* out) const {
    const uint16_t* data = reinterpret_cast<const uint16_t*>(row.data);
    uint16_t gathered[64];
    for (int64_t i = 0; i < 64; ++i) {
      gathered[i] = d + i < width_ ? data[(d + i) * stride_] : uint16_t(0);
    }
    split_bf16(_mm512_loadu_si512(gathered), out);
    split_bf16(_mm512_loadu_si512(gathered + 32), out + 2);
  }

 private:
  int64_t width_, stride_;
};

// FP8 rows, MX blocks along the row (whole blocks of 32), times their block scales.
class Fp8Rows {
 public:
  explicit Fp8Rows(const RowFormat& f)
      : decoder_(f.code_bf16_bytes),
        width_(f.width),
        scale_step_(f.scale_step),
        scale_values_(f.scale_values) {}
  int64_t width() const { return width_; }
  int64_t row_bytes() const { return width_; }

  [[gnu::always_inline]] void read_chunk(const RowSource& row, int64_t d, __m512* out) const {
    read(row, d, _mm512_loadu_si512(row.data + d), out);
  }
  // The tail is one block of 32.
  [[gnu::always_inline]] void read_tail(const RowSource& row, int64_t d, __m512* out) const {
    const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.data + d));
    read(row, d, _mm512_zextsi256_si512(codes), out);
  }

 private:
  [[gnu::always_inline]] void read(const RowSource& row, int64_t d, __m512i codes,
                                   __m512* out) const {
    __m512i words[2];
    decoder_.to_bf16(codes, words);
    const uint8_t* scales = row.scales + (d / 32) * scale_step_;
    split_bf16(words[0], out);
    split_bf16(words[1], out + 2);
    // The block scale multiplies the exact code values: the dequantized values of spec §5.
    const __m512 first = _mm512_set1_ps(scale_values_[scales[0]]);
    out[0] = _mm512_mul_ps(out[0], first);
    out[1] = _mm512_mul_ps(out[1], first);
    if (width_ - d < 64) return;
    const __m512 second = _mm512_set1_ps(scale_values_[scales[scale_step_]]);
    out[2] = _mm512_mul_ps(out[2], second);
    out[3] = _mm512_mul_ps(out[3], second);
  }

  Fp8Decoder decoder_;
  int64_t width_, scale_step_;
  const float* scale_values_;
};

// Fetches next row k of the stream (`bytes` of elements and its first scale) into the L2 cache.
// Inlined: GCC deems a function of prefetches alone pure and drops the calls.
[[gnu::always_inline]] inline void prefetch_next(const RowStream& s, int64_t k, int64_t bytes) {
  if (k >= s.next_count) return;
  const RowSource& row = s.next[k];
  prefetch_lines<2>(row.data, bytes);
  if (row.scales) __builtin_prefetch(row.scales, 0, 2);
}

// Keys k and k + 1 of a stream, whose rows the score kernels read together (past the last key,
// the last one again: read, never stored), with the rows at the same positions of the next tile
// fetched into L2.
struct KeyPair {
  const RowSource& a;
  const RowSource& b;
};
[[gnu::always_inline]] inline KeyPair key_pair(const RowStream& s, int64_t k, int64_t bytes) {
  prefetch_next(s, k, bytes);
  prefetch_next(s, k + 1, bytes);
  return {s.rows[k * s.step], s.rows[(k + 1 < s.count ? k + 1 : k) * s.step]};
}

// For two keys a and b: acc[r] += the products of query row r (q at element d, rows q_stride
// apart) with a[0..NV), acc[4 + r] with b[0..NV). Each query vector is loaded once for both keys:
// the loads, not the FMAs, would bound a key alone.
template <int NV>
[[gnu::always_inline]] inline void add_products(const float* q, int64_t q_stride, const __m512* a,
                                                const __m512* b, __m512* acc) {
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 qv = _mm512_load_ps(q + r * q_stride + 16 * v);
      acc[r] = _mm512_fmadd_ps(qv, a[v], acc[r]);
      acc[4 + r] = _mm512_fmadd_ps(qv, b[v], acc[4 + r]);
    }
  }
}

// Four row accumulators folded into one vector: lanes 4r..4r+3 hold partial sums of row r.
[[gnu::always_inline]] inline __m512 fold_rows(const __m512* a) {
  const __m512 t0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x44), _mm512_shuffle_f32x4(a[0], a[1], 0xee));
  const __m512 t1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x44), _mm512_shuffle_f32x4(a[2], a[3], 0xee));
  return _mm512_add_ps(_mm512_shuffle_f32x4(t0, t1, 0x88), _mm512_shuffle_f32x4(t0, t1, 0xdd));
}

// The folds of 4 keys summed: lane 4r + j is the dot product of key j with row r.
[[gnu::always_inline]] inline __m512 finish_folds(const __m512* u) {
  const __m512 e0 =
      _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xdd));
  const __m512 e1 =
      _mm512_add_ps(_mm512_shuffle_ps(u[2], u[3], 0x88), _mm512_shuffle_ps(u[2], u[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_ps(e0, e1, 0x88), _mm512_shuffle_ps(e0, e1, 0xdd));
}

// Lane 4 r + j of `sums` (row r, key j of four) into out[r * ld + j], for the first `left` of the
// four keys (the others lie past the stream's end).
[[gnu::always_inline]] inline void store_four_keys(__m512 sums, int64_t left, float* out,
                                                   int64_t ld) {
  const __mmask8 keys = __mmask8((1u << (left < 4 ? left : 4)) - 1);
  _mm_mask_storeu_ps(out, keys, _mm512_castps512_ps128(sums));
  _mm_mask_storeu_ps(out + ld, keys, _mm512_extractf32x4_ps(sums, 1));
  _mm_mask_storeu_ps(out + 2 * ld, keys, _mm512_extractf32x4_ps(sums, 2));
  _mm_mask_storeu_ps(out + 3 * ld, keys, _mm512_extractf32x4_ps(sums, 3));
}

// Scores of 4 query rows (q: [4][q_stride], 64-byte aligned) against every key: two keys at a
// time with one accumulator per (key, row), so that the queries stay memory operands, folded per
// key, then finished 4 keys at a time.
template <class Rows>
void score_rows4(const Rows& rows, const RowStream& s, const float* q, int64_t q_stride,
                 float* scores, int64_t ld) {
  const int64_t whole = rows.width() / 64 * 64;
  const bool one_block_tail = rows.width() - whole <= 32;
  __m512 folds[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
  for (int64_t k = 0; k < s.count; k += 2) {
    const auto [row_a, row_b] = key_pair(s, k, rows.row_bytes());
    __m512 acc[8];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    __m512 key_a[4], key_b[4];
    for (int64_t d = 0; d < whole; d += 64) {
      rows.read_chunk(row_a, d, key_a);
      rows.read_chunk(row_b, d, key_b);
      add_products<4>(q + d, q_stride, key_a, key_b, acc);
    }
    if (whole < rows.width()) {
      rows.read_tail(row_a, whole, key_a);
      rows.read_tail(row_b, whole, key_b);
      if (one_block_tail) {
        add_products<2>(q + whole, q_stride, key_a, key_b, acc);
      } else {
        add_products<4>(q + whole, q_stride, key_a, key_b, acc);
      }
    }
    const int64_t j = k % 4;
    folds[j] = fold_rows(acc);
    folds[j + 1] = fold_rows(acc + 4);
    if (j == 0 && k + 2 < s.count) continue;
    // Past the last key, earlier folds (or zeros): finished, never stored.
    const __m512 sums = finish_folds(folds);
    const int64_t k0 = k - j;
    store_four_keys(sums, s.count - k0, scores + k0, ld);
  }
}

// Calls fn with the row reader of format f: f16, FP8, contiguous or strided bf16 rows. The one
// place a RowFormat picks its reader, for the score and the value kernels alike.
template <class Fn>
void with_rows(const RowFormat& f, Fn&& fn) {
  if (f.elem == RowElem::f16) {
    fn(F16Rows(f));
  } else if (f.elem != RowElem::bf16) {
    fn(Fp8Rows(f));
  } else if (f.elem_stride == 1) {
    fn(Bf16Rows(f));
  } else {
    fn(StridedBf16Rows(f));
  }
}

template <class Rows>
void scores_with(const Rows& rows, const RowStream& stream, const float* q, int64_t q_stride,
                 int64_t query_rows, float* scores, int64_t ld) {
  RowStream s = stream;
  for (int64_t r0 = 0; r0 < query_rows; r0 += 4, s.next_count = 0) {
    score_rows4(rows, s, q + r0 * q_stride, q_stride, scores + r0 * ld, ld);
  }
}

void scores_from_rows(const RowFormat& f, const RowStream& keys, const float* q, int64_t q_stride,
                      int64_t query_rows, float* scores, int64_t ld) {
  with_rows(
      f, [&](const auto& rows) { scores_with(rows, keys, q, q_stride, query_rows, scores, ld); });
}

// The online softmax step of softmax_step (kernels.h), one row at a time with the keys in the
// vector lanes: few rows cost few vectors.
void softmax_by_rows(float* scores, int64_t ld, int64_t query_rows, int64_t key_count,
                     const float* first, const float* last, float* row_max, float* row_sum,
                     float* rescale) {
  using Ops = Avx512;
  const __m512 lane = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  for (int64_t r = 0; r < query_rows; ++r) {
    float* s = scores + r * ld;
    __m512 max = minus_inf;
    for (int64_t k = 0; k < key_count; k += 16) {
      const __mmask16 valid =
          key_count - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (key_count - k)) - 1);
      __m512 v = _mm512_mask_loadu_ps(minus_inf, valid, s + k);
      if (first) {
        v = Ops::keep_between(v, _mm512_add_ps(lane, _mm512_set1_ps(float(k))),
                              _mm512_set1_ps(first[r]), _mm512_set1_ps(last[r]));
        _mm512_mask_storeu_ps(s + k, valid, v);
      }
      max = Ops::max(max, v);
    }
    const float old_max = row_max[r], tile_max = _mm512_reduce_max_ps(max);
    const float new_max = old_max < tile_max ? tile_max : old_max;
    // A row with no visible key so far keeps max -inf; subtracting 0 instead keeps its weights 0.
    const __m512 shift = _mm512_set1_ps(new_max == -__builtin_inff() ? 0.0f : new_max);
    const float factor = _mm512_cvtss_f32(Ops::exp2(_mm512_sub_ps(_mm512_set1_ps(old_max), shift)));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t k = 0; k < key_count; k += 16) {
      const __mmask16 valid =
          key_count - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (key_count - k)) - 1);
      const __m512 p =
          Ops::exp2(_mm512_sub_ps(_mm512_mask_loadu_ps(minus_inf, valid, s + k), shift));
      _mm512_mask_storeu_ps(s + k, valid, p);
      sum = _mm512_add_ps(sum, p);
    }
    row_sum[r] = row_sum[r] * factor + _mm512_reduce_add_ps(sum);
    row_max[r] = new_max;
    rescale[r] = factor;
  }
}

// Output columns of one block of 32, natural order <-> even/odd order.
struct BlockOrder {
  __m512i even, odd, low, high;
  BlockOrder()
      : even(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)),
        odd(_mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)),
        low(_mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)),
        high(_mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)) {}
};

// Output rows [0, R) x columns [d, d + 32 NB) (NB blocks of 32; the row's tail when kTail) over
// every key, in registers, in even/odd order while they accumulate.
template <class Rows, int R, int NB, bool kTail>
void value_block_from_rows(const Rows& rows, const RowStream& s, const float* weights, int64_t ld,
                           const float* rescale, int64_t d, float* out, int64_t out_stride) {
  constexpr int NV = 2 * NB;
  const BlockOrder order;
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r) {
    const __m512 factor = _mm512_set1_ps(rescale[r]);
    for (int b = 0; b < NB; ++b) {
      const float* o = out + r * out_stride + d + 32 * b;
      const __m512 low = _mm512_loadu_ps(o), high = _mm512_loadu_ps(o + 16);
      acc[r][2 * b] = _mm512_mul_ps(_mm512_permutex2var_ps(low, order.even, high), factor);
      acc[r][2 * b + 1] = _mm512_mul_ps(_mm512_permutex2var_ps(low, order.odd, high), factor);
    }
  }
  for (int64_t k = 0; k < s.count; ++k) {
    prefetch_next(s, k, rows.row_bytes());
    __m512 v[4];
    if constexpr (kTail) {
      rows.read_tail(s.rows[k * s.step], d, v);
    } else {
      rows.read_chunk(s.rows[k * s.step], d, v);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 p = _mm512_set1_ps(weights[r * ld + k]);
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(p, v[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < NB; ++b) {
      float* o = out + r * out_stride + d + 32 * b;
      const __m512 even = acc[r][2 * b], odd = acc[r][2 * b + 1];
      _mm512_storeu_ps(o, _mm512_permutex2var_ps(even, order.low, odd));
      _mm512_storeu_ps(o + 16, _mm512_permutex2var_ps(even, order.high, odd));
    }
  }
}

// Rows [0, R) of the output over every column; the next rows are fetched on the first pass.
template <class Rows, int R>
void value_rows_from_rows(const Rows& rows, const RowStream& stream, const float* weights,
                          int64_t ld, const float* rescale, float* out, int64_t out_stride) {
  RowStream s = stream;
  const int64_t whole = rows.width() / 64 * 64;
  for (int64_t d = 0; d < whole; d += 64, s.next_count = 0) {
    value_block_from_rows<Rows, R, 2, false>(rows, s, weights, ld, rescale, d, out, out_stride);
  }
  if (whole == rows.width()) return;
  if (rows.width() - whole <= 32) {
    value_block_from_rows<Rows, R, 1, true>(rows, s, weights, ld, rescale, whole, out, out_stride);
  } else {
    value_block_from_rows<Rows, R, 2, true>(rows, s, weights, ld, rescale, whole, out, out_stride);
  }
}

template <class Rows>
void values_with(const Rows& rows, const RowStream& stream, const float* weights, int64_t ld,
                 const float* rescale, int64_t query_rows, float* out, int64_t out_stride) {
  RowStream s = stream;
  for (int64_t r = 0; r < query_rows; r += 4, s.next_count = 0) {
    const float* w = weights + r * ld;
    float* o = out + r * out_stride;
    switch (query_rows - r) {
      case 1:
        value_rows_from_rows<Rows, 1>(rows, s, w, ld, rescale + r, o, out_stride);
        break;
      case 2:
        value_rows_from_rows<Rows, 2>(rows, s, w, ld, rescale + r, o, out_stride);
        break;
      case 3:
        value_rows_from_rows<Rows, 3>(rows, s, w, ld, rescale + r, o, out_stride);
        break;
      default:
        value_rows_from_rows<Rows, 4>(rows, s, w, ld, rescale + r, o, out_stride);
    }
  }
}

void accumulate_from_rows(const RowFormat& f, const RowStream& values, const float* weights,
                          int64_t ld, const float* rescale, int64_t query_rows, float* out,
                          int64_t out_stride) {
  with_rows(f, [&](const auto& rows) {
    values_with(rows, values, weights, ld, rescale, query_rows, out, out_stride);
  });
}

}  // namespace
}  // namespace mxattn::cpu::simd
