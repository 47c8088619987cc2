// MX Q dequantized on chip (KernelTraits::kQCodes): before their first product the math warp groups
// read the CTA's query tile as MX codes and E8M0 scales straight from Q, each thread eight
// consecutive elements of a row at a time, and write their exact bf16 values (mx_group.cuh, the
// bits the dense copy of dense_inputs.cu would give) into Q's swizzled shared tile, rows past Sq as
// zeros (as the tensor copy fills them). Q is read once per CTA, so this replaces a whole pass
// over Q (its dense copy: codes read, bf16 written and read back) with the loads of the codes.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/tensor.hpp>

#include <cstdint>

#include "cuda/common/kv_format.cuh"
#include "cuda/prefill/mx_group.cuh"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/tile_scheduler.cuh"

namespace mxattn::cuda::prefill {

using namespace cute;

// kAligned: every group of Q starts mx_group_align bytes aligned (PrefillParams::q_aligned_groups),
// so the loads are plain vector loads; else bytes. The loads of all groups are issued before the
// first conversion: rows past Sq read row Sq - 1 and are zeroed afterwards, so that no branch
// separates them (a branch per group kept each group's DRAM wait apart, 4 us a CTA).
template <class Traits, DType kType, bool kAligned>
__device__ __forceinline__ void dequantize_q_as(const PrefillParams& p, const CtaWork& w,
                                                typename Traits::SharedStorage& st,
                                                int thread_idx) {
  constexpr int kChunks = Traits::kDimQK / kGroup;  // groups of a row
  constexpr int kTotal = Traits::kBlockM * kChunks;
  static_assert(kTotal % Traits::kMmaThreads == 0);
  constexpr int kPerThread = kTotal / Traits::kMmaThreads;
  Tensor sQ = make_tensor(make_smem_ptr(st.q), typename Traits::SmemLayoutQ{});
  const uint8_t* codes = static_cast<const uint8_t*>(p.q);
  const int64_t head = w.b * p.q_stride[0] + w.h * p.q_stride[2];
  const int64_t head_scales = w.b * p.q_scale_stride[0] + w.h * p.q_scale_stride[2];
  uint32_t words[kPerThread][2];
  uint8_t scale_bytes[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = thread_idx + i * Traits::kMmaThreads;
    const int r = idx / kChunks, d0 = idx % kChunks * kGroup;
    const int64_t row = core::min64(w.row_first + r, p.seq_q - 1);
    // Packed rows are contiguous along the head dim and start on a byte (validated); d0 is a
    // multiple of 8, so the group starts on a byte too.
    const uint8_t* src = codes + (head + row * p.q_stride[1] + d0) * bits_of(kType) / 8;
    words[i][0] = words[i][1] = 0;
    if constexpr (kAligned) {
      load_aligned_group_words<kType>(src, words[i]);
    } else {
      load_group_words<kType>(src, words[i]);
    }
    scale_bytes[i] =
        p.q_scales[head_scales + row * p.q_scale_stride[1] + d0 / 32 * p.q_scale_stride[3]];
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = thread_idx + i * Traits::kMmaThreads;
    const int r = idx / kChunks, d0 = idx % kChunks * kGroup;
    const bool valid = w.row_first + r < p.seq_q;  // rows past Sq: zeros, as the copy fills them
    uint32_t group_words[2] = {valid ? words[i][0] : 0u, valid ? words[i][1] : 0u};
    uint32_t pairs[kGroup / 2];
    mx_group_pairs<kType>(group_words, valid ? detail::e8m0_value(scale_bytes[i]) : 0.0f, pairs);
    // Eight head-dim elements from a multiple of 8 are one aligned 16-byte chunk of the 128-byte
    // swizzled rows (prefill_layout_test.cu checks it for Q's layout).
    *reinterpret_cast<uint4*>(&sQ(r, d0)) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  }
}

template <class Traits, DType kType>
__device__ __forceinline__ void dequantize_q_of(const PrefillParams& p, const CtaWork& w,
                                                typename Traits::SharedStorage& st,
                                                int thread_idx) {
  if (p.q_aligned_groups) {
    dequantize_q_as<Traits, kType, true>(p, w, st, thread_idx);
  } else {
    dequantize_q_as<Traits, kType, false>(p, w, st, thread_idx);
  }
}

// The whole tile by all math threads, then visible to the tensor cores.
template <class Traits>
__device__ __forceinline__ void dequantize_q(const PrefillParams& p, const CtaWork& w,
                                             typename Traits::SharedStorage& st, int thread_idx,
                                             uint32_t barrier_id) {
  static_assert(std::is_same_v<typename Traits::Element, cutlass::bfloat16_t>,
                "MX values need bf16's range");
  with_mx_type(p.q_dtype, [&](auto type) {
    dequantize_q_of<Traits, decltype(type)::value>(p, w, st, thread_idx);
  });
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(Traits::kMmaThreads, barrier_id);
}

}  // namespace mxattn::cuda::prefill
