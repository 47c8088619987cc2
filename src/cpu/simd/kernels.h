// The tile kernels of the fast CPU engine, written once over a vector-operation type `Ops` (see
// ops_*.h) and instantiated by each ISA translation unit. Everything here has internal linkage, so
// the copies built with different ISA flags never meet at link time.
#pragma once

#include <cstdint>

#include "cpu/fast_kernels.h"

namespace mxattn::cpu::simd {
namespace {

inline int64_t min_of(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// ---- Converting K and V rows to f32 ----

// Plain 16-bit rows (f16, bf16), any element stride: whole vectors, then a zero-padded last one.
template <class Ops, class Convert>
void convert_16bit_row(const RowFormat& f, const uint16_t* src, float* dst, Convert convert) {
  constexpr int W = Ops::kLanes;
  const int64_t n = f.width, step = f.elem_stride;
  int64_t d = 0;
  if (step == 1) {
    for (; d + W <= n; d += W) Ops::store(dst + d, convert(src + d));
  }
  while (d < n) {
    uint16_t gathered[W] = {};
    float values[W];
    const int64_t count = min_of(W, n - d);
    for (int64_t i = 0; i < count; ++i) gathered[i] = src[(d + i) * step];
    Ops::store(values, convert(gathered));
    for (int64_t i = 0; i < count; ++i) dst[d + i] = values[i];
    d += count;
  }
}

// FP8 codes, exactly. The block scale is applied after, as a separate power-of-two multiply, so
// nothing overflows early.
template <class Ops>
typename Ops::F decode_fp8(bool e4m3, const uint8_t* codes) {
  return e4m3 ? Ops::mul(Ops::from_e4m3_over_256(codes), Ops::set1(256.0f)) : Ops::from_e5m2(codes);
}

// E8M0 bytes up to this one times 2^8 are still finite, so the E4M3 unbias folds into the scale.
constexpr uint8_t kLargestFoldableScale = 127 + 119;

// FP8 rows: packed bytes, the width a whole number of 32-element blocks (validated). The format's
// fields are read into locals once, so the stores cannot make the compiler reload them.
template <class Ops, bool kE4m3>
void convert_fp8_rows(const RowFormat& f, const RowSource* rows, int64_t count, float* dst,
                      int64_t dst_stride) {
  constexpr int W = Ops::kLanes;
  const int64_t width = f.width, step = f.scale_step;
  const float* scale_values = f.scale_values;
  for (int64_t r = 0; r < count; ++r, dst += dst_stride) {
    const uint8_t* codes = rows[r].data;
    const uint8_t* scales = rows[r].scales;
    if (f.scale_span == 1) {
      for (int64_t d = 0; d < width; d += W) {
        float row_scales[W];
        for (int i = 0; i < W; ++i) row_scales[i] = scale_values[scales[(d + i) * step]];
        Ops::store(dst + d, Ops::mul(decode_fp8<Ops>(kE4m3, codes + d), Ops::load(row_scales)));
      }
      continue;
    }
    for (int64_t d = 0; d < width; d += 32, scales += step) {
      const uint8_t e = *scales;
      const float value = scale_values[e];
      if (!kE4m3 || e <= kLargestFoldableScale) {
        Ops::fp8_block32(kE4m3, codes + d, Ops::set1(kE4m3 ? value * 256.0f : value), dst + d);
        continue;
      }
      Ops::fp8_block32(true, codes + d, Ops::set1(256.0f), dst + d);
      for (int64_t i = d; i < d + 32; i += W) {
        Ops::store(dst + i, Ops::mul(Ops::load(dst + i), Ops::set1(value)));
      }
    }
  }
}

// FP6 and FP4 rows with MX blocks along the row, in the sets whose Ops decode a block of 32 codes
// at a time (fp4_block32, fp6_block32): the code values from a vector table, times the block
// scale.
template <class Ops>
void convert_packed_blocks(const RowFormat& f, const RowSource* rows, int64_t count, float* dst,
                           int64_t dst_stride) {
  using F = typename Ops::F;
  const bool fp6 = f.elem == RowElem::fp6;
  const int64_t width = f.width, step = f.scale_step, block_bytes = fp6 ? 24 : 16;
  const float* scale_values = f.scale_values;
  // FP6: the values of codes 0..31 (FP4 has only 16).
  const F low = Ops::load(f.code_values), high = fp6 ? Ops::load(f.code_values + 16) : low;
  for (int64_t r = 0; r < count; ++r, dst += dst_stride) {
    const uint8_t* codes = rows[r].data;
    const uint8_t* scales = rows[r].scales;
    for (int64_t d = 0; d < width; d += 32, codes += block_bytes, scales += step) {
      const F factor = Ops::set1(scale_values[*scales]);
      if (fp6) {
        Ops::fp6_block32(codes, low, high, factor, dst + d);
      } else {
        Ops::fp4_block32(codes, low, factor, dst + d);
      }
    }
  }
}

template <class Ops>
void convert_rows(const RowFormat& f, const RowSource* rows, int64_t count, float* dst,
                  int64_t dst_stride) {
  constexpr int W = Ops::kLanes;
  switch (f.elem) {
    case RowElem::e4m3:
      convert_fp8_rows<Ops, true>(f, rows, count, dst, dst_stride);
      return;
    case RowElem::e5m2:
      convert_fp8_rows<Ops, false>(f, rows, count, dst, dst_stride);
      return;
    case RowElem::fp6:
    case RowElem::fp4:
      if constexpr (requires { &Ops::fp6_block32; }) {
        if (f.scale_span == 32) {
          convert_packed_blocks<Ops>(f, rows, count, dst, dst_stride);
          return;
        }
      }
      convert_packed_rows(f, rows, count, dst, dst_stride);
      return;
    default:
      break;
  }
  for (int64_t r = 0; r < count; ++r) {
    float* out = dst + r * dst_stride;
    const RowSource& row = rows[r];
    switch (f.elem) {
      case RowElem::f16:
        convert_16bit_row<Ops>(f, reinterpret_cast<const uint16_t*>(row.data), out,
                               [](const uint16_t* p) { return Ops::from_f16(p); });
        break;
      case RowElem::bf16:
        convert_16bit_row<Ops>(f, reinterpret_cast<const uint16_t*>(row.data), out,
                               [](const uint16_t* p) { return Ops::from_bf16(p); });
        break;
      default: {
        const float* src = reinterpret_cast<const float*>(row.data);
        int64_t d = 0;
        if (f.elem_stride == 1) {
          for (; d + W <= f.width; d += W) Ops::store(out + d, Ops::load(src + d));
        }
        for (; d < f.width; ++d) out[d] = src[d * f.elem_stride];
      }
    }
  }
}

// ---- Scores with one vector lane per query row ----

// A KR x MV register block: keys [0, KR) against row vectors [0, MV).
template <class Ops, int KR, int MV>
void score_block(const float* keys, int64_t key_stride, const float* q_t, int64_t rows_padded,
                 int64_t dim_padded, float* st) {
  constexpr int W = Ops::kLanes;
  using F = typename Ops::F;
  F acc[KR][MV];
  for (int k = 0; k < KR; ++k)
    for (int v = 0; v < MV; ++v) acc[k][v] = Ops::zero();
  for (int64_t d = 0; d < dim_padded; ++d) {
    F q[MV];
    for (int v = 0; v < MV; ++v) q[v] = Ops::load(q_t + d * rows_padded + v * W);
    for (int k = 0; k < KR; ++k) {
      const F key = Ops::set1(keys[k * key_stride + d]);
      for (int v = 0; v < MV; ++v) acc[k][v] = Ops::fmadd(key, q[v], acc[k][v]);
    }
  }
  for (int k = 0; k < KR; ++k)
    for (int v = 0; v < MV; ++v) Ops::store(st + k * rows_padded + v * W, acc[k][v]);
}

// Runs the block of `keys_left` keys (at most KR) with MV row vectors.
template <class Ops, int MV, int KR = Ops::kScoreKeys>
void score_keys(int64_t keys_left, const float* keys, int64_t key_stride, const float* q_t,
                int64_t rows_padded, int64_t dim_padded, float* st) {
  if constexpr (KR > 1) {
    if (keys_left < KR) {
      score_keys<Ops, MV, KR - 1>(keys_left, keys, key_stride, q_t, rows_padded, dim_padded, st);
      return;
    }
  }
  score_block<Ops, KR, MV>(keys, key_stride, q_t, rows_padded, dim_padded, st);
}

template <class Ops, int MV>
void score_row_vectors(const float* keys, int64_t key_stride, int64_t key_count, const float* q_t,
                       int64_t rows_padded, int64_t dim_padded, float* st) {
  for (int64_t k = 0; k < key_count; k += Ops::kScoreKeys) {
    score_keys<Ops, MV>(key_count - k, keys + k * key_stride, key_stride, q_t, rows_padded,
                        dim_padded, st + k * rows_padded);
  }
}

template <class Ops, int MV = Ops::kScoreVecs>
void score_vectors_left(int64_t vectors_left, const float* keys, int64_t key_stride,
                        int64_t key_count, const float* q_t, int64_t rows_padded,
                        int64_t dim_padded, float* st) {
  if constexpr (MV > 1) {
    if (vectors_left < MV) {
      score_vectors_left<Ops, MV - 1>(vectors_left, keys, key_stride, key_count, q_t, rows_padded,
                                      dim_padded, st);
      return;
    }
  }
  score_row_vectors<Ops, MV>(keys, key_stride, key_count, q_t, rows_padded, dim_padded, st);
}

template <class Ops>
void scores_by_row_lanes(const float* keys, int64_t key_stride, int64_t key_count, const float* q_t,
                         int64_t rows_padded, int64_t row_count, int64_t dim_padded, float* st) {
  constexpr int W = Ops::kLanes;
  const int64_t vectors = row_count / W;
  for (int64_t v = 0; v < vectors; v += Ops::kScoreVecs) {
    score_vectors_left<Ops>(vectors - v, keys, key_stride, key_count, q_t + v * W, rows_padded,
                            dim_padded, st + v * W);
  }
}

// ---- Scores with vectors along the head dim (few query rows) ----

// Blocks of 4 rows x (lanes / 4) keys: one accumulator per (key, row) pair, reduced across lanes
// all at once. Rows past `rows` are the zero padding of q (rows_padded is a multiple of 16).
template <class Ops>
void scores_by_dim_lanes(const float* keys, int64_t key_stride, int64_t key_count, const float* q,
                         int64_t rows, int64_t dim_padded, float* st, int64_t rows_padded) {
  constexpr int W = Ops::kLanes;
  constexpr int kRows = 4;
  constexpr int kKeys = W / kRows;
  using F = typename Ops::F;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    for (int64_t k0 = 0; k0 < key_count; k0 += kKeys) {
      const float* key_rows[kKeys];
      for (int k = 0; k < kKeys; ++k)
        key_rows[k] = keys + min_of(k0 + k, key_count - 1) * key_stride;
      const float* q_rows = q + r0 * dim_padded;
      F acc[W];
      for (int i = 0; i < W; ++i) acc[i] = Ops::zero();
      for (int64_t d = 0; d < dim_padded; d += W) {
        F qv[kRows];
        for (int r = 0; r < kRows; ++r) qv[r] = Ops::load(q_rows + r * dim_padded + d);
        for (int k = 0; k < kKeys; ++k) {
          const F kv = Ops::load(key_rows[k] + d);
          for (int r = 0; r < kRows; ++r)
            acc[k * kRows + r] = Ops::fmadd(kv, qv[r], acc[k * kRows + r]);
        }
      }
      float sums[W];
      Ops::store(sums, Ops::reduce_lanes(acc));
      for (int k = 0; k < kKeys && k0 + k < key_count; ++k) {
        for (int r = 0; r < kRows; ++r) st[(k0 + k) * rows_padded + r0 + r] = sums[k * kRows + r];
      }
    }
  }
}

// ---- Online softmax ----

template <class Ops>
void softmax_step(float* st, int64_t rows_padded, int64_t row_count, int64_t key_count,
                  const float* first, const float* last, float* row_max, float* row_sum,
                  float* rescale) {
  constexpr int W = Ops::kLanes;
  using F = typename Ops::F;
  for (int64_t r = 0; r < row_count; r += W) {
    const F old_max = Ops::load(row_max + r);
    F new_max = old_max;
    if (first) {
      const F lo = Ops::load(first + r), hi = Ops::load(last + r);
      for (int64_t k = 0; k < key_count; ++k) {
        float* s = st + k * rows_padded + r;
        const F masked = Ops::keep_between(Ops::load(s), Ops::set1(float(k)), lo, hi);
        Ops::store(s, masked);
        new_max = Ops::max(new_max, masked);
      }
    } else {
      for (int64_t k = 0; k < key_count; ++k) {
        new_max = Ops::max(new_max, Ops::load(st + k * rows_padded + r));
      }
    }
    // A row with no visible key so far keeps max -inf; subtracting 0 instead keeps its weights 0.
    const F shift = Ops::zero_if_neg_inf(new_max);
    const F factor = Ops::exp2(Ops::sub(old_max, shift));
    F sum = Ops::zero();
    for (int64_t k = 0; k < key_count; ++k) {
      float* s = st + k * rows_padded + r;
      const F p = Ops::exp2(Ops::sub(Ops::load(s), shift));
      Ops::store(s, p);
      sum = Ops::add(sum, p);
    }
    Ops::store(row_sum + r, Ops::fmadd(Ops::load(row_sum + r), factor, sum));
    Ops::store(row_max + r, new_max);
    Ops::store(rescale + r, factor);
  }
}

// ---- Weights times values ----

// An MR x NV register block: rows [0, MR) of the output against column vectors [0, NV).
template <class Ops, int MR, int NV>
void value_block(const float* st, int64_t rows_padded, int64_t key_count, const float* values,
                 int64_t value_stride, const float* rescale, float* out, int64_t out_stride) {
  constexpr int W = Ops::kLanes;
  using F = typename Ops::F;
  F acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    const F factor = Ops::set1(rescale[r]);
    for (int c = 0; c < NV; ++c)
      acc[r][c] = Ops::mul(Ops::load(out + r * out_stride + c * W), factor);
  }
  for (int64_t k = 0; k < key_count; ++k) {
    F v[NV];
    for (int c = 0; c < NV; ++c) v[c] = Ops::load(values + k * value_stride + c * W);
    for (int r = 0; r < MR; ++r) {
      const F p = Ops::set1(st[k * rows_padded + r]);
      for (int c = 0; c < NV; ++c) acc[r][c] = Ops::fmadd(p, v[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) Ops::store(out + r * out_stride + c * W, acc[r][c]);
}

template <class Ops, int NV, int MR = Ops::kValueRows>
void value_rows_left(int64_t rows_left, const float* st, int64_t rows_padded, int64_t key_count,
                     const float* values, int64_t value_stride, const float* rescale, float* out,
                     int64_t out_stride) {
  if constexpr (MR > 1) {
    if (rows_left < MR) {
      value_rows_left<Ops, NV, MR - 1>(rows_left, st, rows_padded, key_count, values, value_stride,
                                       rescale, out, out_stride);
      return;
    }
  }
  value_block<Ops, MR, NV>(st, rows_padded, key_count, values, value_stride, rescale, out,
                           out_stride);
}

template <class Ops, int NV>
void value_columns(const float* st, int64_t rows_padded, int64_t key_count, const float* values,
                   int64_t value_stride, const float* rescale, int64_t rows, float* out,
                   int64_t out_stride) {
  for (int64_t r = 0; r < rows; r += Ops::kValueRows) {
    value_rows_left<Ops, NV>(rows - r, st + r, rows_padded, key_count, values, value_stride,
                             rescale + r, out + r * out_stride, out_stride);
  }
}

template <class Ops, int NV = Ops::kValueVecs>
void value_columns_left(int64_t vectors_left, const float* st, int64_t rows_padded,
                        int64_t key_count, const float* values, int64_t value_stride,
                        const float* rescale, int64_t rows, float* out, int64_t out_stride) {
  if constexpr (NV > 1) {
    if (vectors_left < NV) {
      value_columns_left<Ops, NV - 1>(vectors_left, st, rows_padded, key_count, values,
                                      value_stride, rescale, rows, out, out_stride);
      return;
    }
  }
  value_columns<Ops, NV>(st, rows_padded, key_count, values, value_stride, rescale, rows, out,
                         out_stride);
}

template <class Ops>
void accumulate_values(const float* st, int64_t rows_padded, int64_t key_count, const float* values,
                       int64_t value_stride, int64_t dim_padded, const float* rescale, int64_t rows,
                       float* out, int64_t out_stride) {
  constexpr int W = Ops::kLanes;
  const int64_t vectors = dim_padded / W;
  for (int64_t c = 0; c < vectors; c += Ops::kValueVecs) {
    value_columns_left<Ops>(vectors - c, st, rows_padded, key_count, values + c * W, value_stride,
                            rescale, rows, out + c * W, out_stride);
  }
}

template <class Ops>
constexpr FastKernels make_kernels(SimdIsa isa) {
  FastKernels k;
  k.isa = isa;
  k.convert_rows = convert_rows<Ops>;
  k.scores_by_row_lanes = scores_by_row_lanes<Ops>;
  k.scores_by_dim_lanes = scores_by_dim_lanes<Ops>;
  k.softmax_step = softmax_step<Ops>;
  k.accumulate_values = accumulate_values<Ops>;
  k.scores_from_rows = nullptr;
  k.scores_bf16_from_rows = nullptr;
  k.softmax_by_rows = nullptr;
  k.accumulate_from_rows = nullptr;
  k.pack_bf16_keys = nullptr;
  k.pack_bf16_values = nullptr;
  k.attend_bf16 = nullptr;
  k.attend_rows_bf16 = nullptr;
  k.release_tiles = nullptr;
  return k;
}

}  // namespace
}  // namespace mxattn::cpu::simd
