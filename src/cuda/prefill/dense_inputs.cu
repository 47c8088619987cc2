// The dense copy of an MX or paged input: for MX, the exact bf16 of each value (mx_group.cuh); for
// bf16 and f16 sources, the values as they are. Each thread writes 8 consecutive elements of a row
// (16 bytes) and reads only those elements and their scales: the codes in one vector load where
// aligned, one scale per 8 elements along the head dim.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/kv_format.cuh"
#include "cuda/prefill/dense_inputs.h"
#include "cuda/prefill/mx_group.cuh"

namespace mxattn::cuda::prefill {
namespace {

constexpr int kThreads = 256;

// Elements [d0, d0 + 8) of one row as bf16 pairs.
template <DType kType>
__device__ __forceinline__ void group_pairs(const DenseInputParams& p, int64_t outer, int64_t slot,
                                            int64_t i2, int64_t row, int64_t d0,
                                            uint32_t (&pairs)[kGroup / 2]) {
  if constexpr (!is_mx(kType)) {
    const uint16_t* src = reinterpret_cast<const uint16_t*>(p.data) + row;
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
      pairs[e / 2] |= uint32_t(src[(d0 + e) * p.stride[3]]) << (16 * (e % 2));
    }
  } else {
    // Packed rows are contiguous along the head dim and start on a byte (validated); d0 is a
    // multiple of 8, so the group starts on a byte too.
    uint32_t words[2] = {};
    load_group_words<kType>(p.data + (row + d0) * bits_of(kType) / 8, words);
    float scale[kGroup];
    if (p.scales_along_slots) {
      const uint8_t* s = p.scales + outer * p.scale_stride[0] + i2 * p.scale_stride[1] +
                         slot / 32 * p.scale_stride[2];
#pragma unroll
      for (int e = 0; e < kGroup; ++e)
        scale[e] = detail::e8m0_value(s[(d0 + e) * p.scale_stride[3]]);
    } else {
      // The group lies in one block of 32: one scale.
      const float one =
          detail::e8m0_value(p.scales[outer * p.scale_stride[0] + slot * p.scale_stride[1] +
                                      i2 * p.scale_stride[2] + d0 / 32 * p.scale_stride[3]]);
#pragma unroll
      for (int e = 0; e < kGroup; ++e) scale[e] = one;
    }
    mx_group_pairs<kType>(words, scale, pairs);
  }
}

// Index: uint32_t where every row and group index fits (the divisions that locate a group then
// cost a few instructions instead of a 64-bit division each), else int64_t.
template <DType kType, class Index>
__global__ void __launch_bounds__(kThreads)
    dense_input_kernel(const __grid_constant__ DenseInputParams p) {
  const Index groups_per_row = Index(p.shape[3] / kGroup);
  const Index n2 = Index(p.shape[2]), n1 = Index(p.shape[1]);
  const Index groups = Index(p.shape[0] * p.shape[1] * p.shape[2]) * groups_per_row;
  for (Index g = Index(blockIdx.x) * kThreads + threadIdx.x; g < groups;
       g += Index(gridDim.x) * kThreads) {
    const Index r = g / groups_per_row;
    const int64_t d0 = int64_t(g - r * groups_per_row) * kGroup;
    const Index r1 = r / n2;
    const int64_t i2 = int64_t(r - r1 * n2);
    const Index i0_index = r1 / n1;
    const int64_t i1 = int64_t(r1 - i0_index * n1);
    const int64_t i0 = int64_t(i0_index);
    uint32_t pairs[kGroup / 2] = {};
    if (p.valid_rows == nullptr || i1 < p.valid_rows[i0]) {
      int64_t outer = i0, slot = i1;
      if (p.block_table != nullptr) {
        outer = p.block_table[i0 * p.table_stride + i1 / p.page_size];
        slot = i1 % p.page_size;
      }
      const int64_t row = outer * p.stride[0] + slot * p.stride[1] + i2 * p.stride[2];
      group_pairs<kType>(p, outer, slot, i2, row, d0, pairs);
    }
    *reinterpret_cast<uint4*>(p.out + int64_t(g) * kGroup) =
        make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  }
}

template <DType kType>
cudaError_t launch_of(const DenseInputParams& p, cudaStream_t stream) {
  const int64_t groups = p.shape[0] * p.shape[1] * p.shape[2] * (p.shape[3] / kGroup);
  const int64_t blocks = (groups + kThreads - 1) / kThreads;
  // Enough blocks to fill the GPU many times over; the grid-stride loop covers the rest.
  const unsigned grid = unsigned(blocks < 65536 ? blocks : 65536);
  // The grid-stride loop's last step must not wrap a 32-bit index either.
  if (groups + int64_t(grid) * kThreads < (int64_t(1) << 32)) {
    dense_input_kernel<kType, uint32_t><<<grid, kThreads, 0, stream>>>(p);
  } else {
    dense_input_kernel<kType, int64_t><<<grid, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_dense_input(const DenseInputParams& p, cudaStream_t stream) {
  if (p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3] == 0) return cudaSuccess;
  if (p.dtype == DType::bf16) return launch_of<DType::bf16>(p, stream);
  if (p.dtype == DType::f16) return launch_of<DType::f16>(p, stream);
  if (!is_mx(p.dtype)) return cudaErrorInvalidValue;
  return with_mx_type(p.dtype,
                      [&](auto type) { return launch_of<decltype(type)::value>(p, stream); });
}

}  // namespace mxattn::cuda::prefill
