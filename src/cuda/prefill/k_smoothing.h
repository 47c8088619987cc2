// K smoothing (spec §5): with the mean key k_mean removed from K by its producer, softmax and O are
// unchanged but the LSE is short by scale * dot(q, k_mean[b, h / g]). The engine's partials and
// combine work on the shifted values; this adds the shift back to the final LSE, once, at the end.
// Plain C++: the API layer sees no device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mxattn/dtype.h"

namespace mxattn::cuda::prefill {

struct LseShiftParams {
  // Q as the attention kernel read it: bf16 or f16 [B, Sq, Hq, Dqk], head dim contiguous, element
  // strides of the first three axes; or MX codes with their E8M0 scales [B, Sq, Hq, Dqk / 32]
  // (element strides), dequantized as the kernel does (mx_group.cuh).
  const void* q = nullptr;
  DType q_dtype = DType::bf16;
  int64_t q_stride[3] = {};
  const uint8_t* q_scales = nullptr;
  int64_t q_scale_stride[4] = {};
  const float* k_mean = nullptr;  // [B, Hkv, Dqk], contiguous
  float* lse = nullptr;           // [B, Hq, Sq], element strides
  int64_t lse_stride[3] = {};
  int64_t batch = 0;
  int64_t seq_q = 0;
  int64_t heads_q = 0;
  int64_t group = 1;
  int64_t dim_qk = 0;
  float scale = 0.0f;
};

// Adds scale * dot(q, k_mean) to every LSE row that saw a key (-inf stays -inf), on `stream`.
cudaError_t launch_lse_shift(const LseShiftParams& params, cudaStream_t stream);

}  // namespace mxattn::cuda::prefill
