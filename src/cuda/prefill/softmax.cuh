// The online softmax over key tiles, in registers: each thread holds whole rows' worth of columns
// split over the four threads of a quad, so row reductions are two shuffles. Scores stay unscaled;
// the scale enters once, folded with log2(e) into the exponent (exp2(s * scale_log2 - m_scaled)).
#pragma once

#include <cute/tensor.hpp>

#include <cmath>

#include "cuda/prefill/fragments.cuh"

namespace mxattn::cuda::prefill {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// What the epilogue needs of one row: its normalizer and its natural-log LSE.
struct RowResult {
  bool empty = true;  // no visible key: O = 0 and LSE = -inf exactly
  float inv_sum = 0.0f;
  float lse = -INFINITY;
};

template <int kRows>
struct OnlineSoftmax {
  static constexpr int kRowCount = kRows;
  float row_max[kRows];  // running maximum of the raw scores (-inf while the row saw nothing)
  float row_sum[kRows];  // this thread's share of the running sum, relative to row_max

  __device__ __forceinline__ OnlineSoftmax() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Folds a masked tile of scores in: S becomes P relative to the new maximum, and `rescale`
  // receives the factors exp2((m_old - m_new) * scale_log2) that bring O to that maximum.
  template <class FragS>
  __device__ __forceinline__ void step(FragS& scores, float scale_log2, float (&rescale)[kRows]) {
    auto s = rows_cols_view(scores);
    static_assert(decltype(size<0>(s))::value == kRows);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float m = row_max[r];
#pragma unroll
      for (int c = 0; c < size<1>(s); ++c) m = fmaxf(m, s(r, c));
      m = quad_max(m);
      // A row that saw nothing keeps a finite reference, so exp2(-inf - ref) is 0, never NaN.
      const float m_scaled = m == -INFINITY ? 0.0f : m * scale_log2;
      rescale[r] = fast_exp2(row_max[r] * scale_log2 - m_scaled);
      row_max[r] = m;
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < size<1>(s); ++c) {
        const float e = fast_exp2(fmaf(s(r, c), scale_log2, -m_scaled));
        s(r, c) = e;
        sum += e;
      }
      row_sum[r] = fmaf(row_sum[r], rescale[r], sum);
    }
  }

  template <class FragO>
  __device__ __forceinline__ void rescale_output(FragO& out, const float (&rescale)[kRows]) const {
    auto o = rows_cols_view(out);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= rescale[r];
  }

  // Whole-row sums across the quad, then each row's normalizer and LSE (natural log).
  __device__ __forceinline__ void finish(float scale, RowResult (&rows)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      rows[r].empty = sum == 0.0f;  // NaN is not empty: it propagates
      rows[r].inv_sum = rows[r].empty ? 0.0f : 1.0f / sum;
      rows[r].lse = rows[r].empty ? -INFINITY : row_max[r] * scale + logf(sum);
    }
  }
};

}  // namespace mxattn::cuda::prefill
