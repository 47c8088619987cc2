// Eight consecutive MX codes of one row (a group) dequantized exactly into bf16: code value times
// 2^(scale - 127), rounded once to bf16, exact wherever the product is a bf16 number (which every
// MX value is unless its scale pushes it past bf16's range, as it would f32's). The codes go
// through the decode engine's few-instruction decoders (kv_format.cuh) into f16 values, widened to
// f32 and multiplied by the E8M0 scale as f32: the same f32 product as the CPU engines'
// mx::decode(code) * mx::decode_scale(scale), bit for bit. Shared by the dense copy of MX inputs
// (dense_inputs.cu) and the prefill kernel's MX Q (q_codes.cuh), so both give the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/kv_format.cuh"
#include "cuda/prefill/prefill_params.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::prefill {

// Calls f(std::integral_constant<DType, T>{}) with the MX element type t as a compile-time
// constant T and returns what f returns: the one switch over the MX types of the prefill engine's
// copy, kernel and LSE shift. Any type that is not MX reads as E2M1: callers validate first.
template <class F>
__host__ __device__ __forceinline__ decltype(auto) with_mx_type(DType t, F&& f) {
  switch (t) {
    case DType::e4m3:
      return f(std::integral_constant<DType, DType::e4m3>{});
    case DType::e5m2:
      return f(std::integral_constant<DType, DType::e5m2>{});
    case DType::e2m3:
      return f(std::integral_constant<DType, DType::e2m3>{});
    case DType::e3m2:
      return f(std::integral_constant<DType, DType::e3m2>{});
    default:
      return f(std::integral_constant<DType, DType::e2m1>{});
  }
}

inline constexpr int kGroup = 8;
static_assert(kGroup == 8, "mx_group_bytes and mx_group_align (prefill_params.h) count 8 codes");

// The bytes of one group of a packed MX row as kv_format.cuh's decode_group reads them (FP8:
// w[0], w[1]; FP6: 6 bytes; FP4: w[0]): one vector load where the bytes are aligned for it, else
// bytes. `w` starts zeroed.
template <DType kType>
__device__ __forceinline__ void load_group_words(const uint8_t* src, uint32_t (&w)[2]) {
  constexpr int kBytes = mx_group_bytes(kType);
  const auto address = reinterpret_cast<uintptr_t>(src);
  if constexpr (kBytes == 8) {
    if (address % 8 == 0) {
      const uint2 v = *reinterpret_cast<const uint2*>(src);
      w[0] = v.x;
      w[1] = v.y;
      return;
    }
  } else if constexpr (kBytes == 4) {
    if (address % 4 == 0) {
      w[0] = *reinterpret_cast<const uint32_t*>(src);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < kBytes; ++i) w[i / 4] |= uint32_t(src[i]) << (8 * (i % 4));
}

// load_group_words for bytes known to be mx_group_align(kType)-aligned (prefill_params.h): loads
// only, no test, so that the loads of several groups can all be in flight before the first is used.
template <DType kType>
__device__ __forceinline__ void load_aligned_group_words(const uint8_t* src, uint32_t (&w)[2]) {
  if constexpr (mx_group_bytes(kType) == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    w[0] = v.x;
    w[1] = v.y;
  } else if constexpr (mx_group_bytes(kType) == 4) {
    w[0] = *reinterpret_cast<const uint32_t*>(src);
  } else {
    const uint16_t* half = reinterpret_cast<const uint16_t*>(src);
    w[0] = uint32_t(half[0]) | uint32_t(half[1]) << 16;
    w[1] = half[2];
  }
}

// The group's codes (as load_group_words read them) times each element's scale value, as four
// bf16 pairs of consecutive elements: pairs[q] holds elements 2q (low half) and 2q + 1.
template <DType kType>
__device__ __forceinline__ void mx_group_pairs(const uint32_t (&words)[2],
                                               const float (&scale)[kGroup],
                                               uint32_t (&pairs)[kGroup / 2]) {
  // f16 raw values (code value * 2^-R), then the code values themselves in f16 (exact: every MX
  // code value is an f16 number), then f32 times the scale.
  constexpr int kRaw = detail::KvFormat<kType>::kRawExponent;
  uint32_t raw[4];
  detail::decode_group<kType>(words, raw);
  float value[kGroup];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    __half2 pair = *reinterpret_cast<const __half2*>(&raw[q]);
    if constexpr (kRaw != 0) pair = __hmul2(pair, __float2half2_rn(float(1 << kRaw)));
    const float2 f = __half22float2(pair);
    const int lo = detail::pair_element<kType>(q, 0), hi = detail::pair_element<kType>(q, 1);
    value[lo] = f.x * scale[lo];
    value[hi] = f.y * scale[hi];
  }
#pragma unroll
  for (int q = 0; q < kGroup / 2; ++q) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(value[2 * q], value[2 * q + 1]);
    pairs[q] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// mx_group_pairs for a group that lies in one block of 32 (one scale for its eight codes).
template <DType kType>
__device__ __forceinline__ void mx_group_pairs(const uint32_t (&words)[2], float scale,
                                               uint32_t (&pairs)[kGroup / 2]) {
  float scales[kGroup];
#pragma unroll
  for (int e = 0; e < kGroup; ++e) scales[e] = scale;
  mx_group_pairs<kType>(words, scales, pairs);
}

}  // namespace mxattn::cuda::prefill
