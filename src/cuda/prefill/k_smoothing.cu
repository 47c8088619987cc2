// The LSE shift of K smoothing: one warp per LSE row, the dot product over the head dim spread over
// its lanes, in f32 over the same Q values the attention kernel read.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "cuda/prefill/k_smoothing.h"
#include "cuda/prefill/mx_group.cuh"

namespace mxattn::cuda::prefill {
namespace {

constexpr int kRowsPerBlock = 8;

// This lane's share of dot(q, mean) for a row of MX codes: groups of 8 elements, each as the exact
// bf16 values the attention kernel multiplied.
template <DType kType>
__device__ float mx_lane_dot(const LseShiftParams& p, int64_t q_row, int64_t scale_row,
                             const float* mean, int lane) {
  const uint8_t* codes = static_cast<const uint8_t*>(p.q);
  float dot = 0.0f;
  for (int64_t d0 = int64_t(lane) * kGroup; d0 < p.dim_qk; d0 += 32 * kGroup) {
    uint32_t words[2] = {};
    load_group_words<kType>(codes + (q_row + d0) * bits_of(kType) / 8, words);
    uint32_t pairs[kGroup / 2];
    mx_group_pairs<kType>(
        words, detail::e8m0_value(p.q_scales[scale_row + d0 / 32 * p.q_scale_stride[3]]), pairs);
#pragma unroll
    for (int q = 0; q < kGroup / 2; ++q) {
      const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pairs[q]));
      dot = fmaf(v.x, mean[d0 + 2 * q], dot);
      dot = fmaf(v.y, mean[d0 + 2 * q + 1], dot);
    }
  }
  return dot;
}

__device__ float mx_lane_dot_of(const LseShiftParams& p, int64_t q_row, int64_t scale_row,
                                const float* mean, int lane) {
  return with_mx_type(p.q_dtype, [&](auto type) {
    return mx_lane_dot<decltype(type)::value>(p, q_row, scale_row, mean, lane);
  });
}

__global__ void __launch_bounds__(kRowsPerBlock * 32)
    lse_shift_kernel(const __grid_constant__ LseShiftParams p) {
  const int lane = int(threadIdx.x) & 31;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= p.batch * p.heads_q * p.seq_q) return;
  const int64_t i = row % p.seq_q;
  const int64_t h = row / p.seq_q % p.heads_q;
  const int64_t b = row / (p.seq_q * p.heads_q);
  float* lse = p.lse + b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2];
  const int64_t q_row = b * p.q_stride[0] + i * p.q_stride[1] + h * p.q_stride[2];
  const float* mean = p.k_mean + (b * (p.heads_q / p.group) + h / p.group) * p.dim_qk;
  float dot = 0.0f;
  if (is_mx(p.q_dtype)) {
    const int64_t scale_row =
        b * p.q_scale_stride[0] + i * p.q_scale_stride[1] + h * p.q_scale_stride[2];
    dot = mx_lane_dot_of(p, q_row, scale_row, mean, lane);
  } else {
    for (int64_t d = lane; d < p.dim_qk; d += 32) {
      const float q = p.q_dtype == DType::bf16
                          ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.q)[q_row + d])
                          : __half2float(static_cast<const __half*>(p.q)[q_row + d]);
      dot = fmaf(q, mean[d], dot);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  if (lane == 0 && *lse != -INFINITY) *lse += p.scale * dot;
}

}  // namespace

cudaError_t launch_lse_shift(const LseShiftParams& p, cudaStream_t stream) {
  const int64_t rows = p.batch * p.heads_q * p.seq_q;
  if (rows == 0) return cudaSuccess;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  lse_shift_kernel<<<unsigned(blocks), kRowsPerBlock * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mxattn::cuda::prefill
