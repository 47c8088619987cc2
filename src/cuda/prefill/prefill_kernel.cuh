// The prefill kernel: one CTA per (query tile of 128 rows, query head, split), read top to bottom:
// shared storage and barriers, then the loader warp group streams Q, K and V (mainloop.cuh) while
// the math warp groups compute (mainloop.cuh) and store (epilogue.cuh).
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cute/tensor.hpp>

#include <cstdint>

#include "cuda/prefill/epilogue.cuh"
#include "cuda/prefill/kernel_traits.cuh"
#include "cuda/prefill/mainloop.cuh"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/softmax.cuh"
#include "cuda/prefill/tile_scheduler.cuh"

namespace mxattn::cuda::prefill {

using namespace cute;

// The bulk tensor copies of Q, K (rows, head dim, heads, batch) and V read transposed (head dim,
// rows, heads, batch), each tile one stage of the swizzled shared layout.
template <class Traits>
struct TmaCopies {
  using Element = typename Traits::Element;
  using GmemShape = Shape<int, int, int, int>;
  using RowStride = Stride<int64_t, _1, int64_t, int64_t>;
  using TransposedStride = Stride<_1, int64_t, int64_t, int64_t>;
  template <class Stride_>
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<const Element*>(nullptr)),
                                          GmemShape{}, Stride_{}));
  using Q = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<RowStride>{},
                                   typename Traits::SmemLayoutQ{}));
  using K = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<RowStride>{},
                                   take<0, 2>(typename Traits::SmemLayoutK{})));
  using V = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<TransposedStride>{},
                                   take<0, 2>(typename Traits::SmemLayoutVt{})));
};

template <class Traits>
struct KernelArgs {
  PrefillParams params;
  typename TmaCopies<Traits>::Q tma_q;
  typename TmaCopies<Traits>::K tma_k;
  typename TmaCopies<Traits>::V tma_v;
};

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    prefill_kernel(const __grid_constant__ KernelArgs<Traits> args) {
  using Storage = typename Traits::SharedStorage;
  using TiledMmaPV = typename Traits::TiledMmaPV;
  constexpr int kBlockM = Traits::kBlockM;
  extern __shared__ uint8_t smem_raw[];
  Storage& st = *reinterpret_cast<Storage*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                            ~uintptr_t(1023));
  const PrefillParams& p = args.params;
  const CtaWork w = cta_work<kBlockM>(p);

  if (threadIdx.x == 0) {
    st.q_full.init(1);
    for (int s = 0; s < Traits::kStages; ++s) {
      st.k_full[s].init(1);
      st.v_full[s].init(1);
      st.k_empty[s].init(Traits::kMmaThreads / 32);
      st.v_empty[s].init(Traits::kMmaThreads / 32);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  const int warp_group = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kLoadRegisters>();
    if (w.tile_count > 0 && threadIdx.x < 32 && cute::elect_one_sync()) {
      if constexpr (!Traits::kQCodes) prefetch_tma_descriptor(args.tma_q.get_tma_descriptor());
      prefetch_tma_descriptor(args.tma_k.get_tma_descriptor());
      prefetch_tma_descriptor(args.tma_v.get_tma_descriptor());
      load_tiles<Traits>(args, w, st);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kMmaRegisters>();
    const int thread_idx = int(threadIdx.x) - 128;
    Tensor acc_o = partition_fragment_C(TiledMmaPV{}, Shape<Int<kBlockM>, Int<Traits::kDimV>>{});
    clear(acc_o);
    constexpr int kRows = decltype(size<0>(rows_cols(acc_o.layout())))::value;
    OnlineSoftmax<kRows> softmax;
    if (w.tile_count > 0) compute_tiles<Traits>(p, w, st, thread_idx, acc_o, softmax);
    RowResult rows[kRows];
    softmax.finish(p.scale, rows);
    // The work item read again (56 bytes from L2) rather than held across the main loop, where
    // its fields cost the Dqk 256 kernel registers it does not have.
    const CtaWork done = cta_work<kBlockM>(p);
    if (p.o_chunks && done.partial_rows == 0 && p.o_dtype == DType::bf16) {
      store_tile_staged<Traits, cutlass::bfloat16_t>(p, done, acc_o, rows, thread_idx, st);
    } else if (p.o_chunks && done.partial_rows == 0) {
      store_tile_staged<Traits, cutlass::half_t>(p, done, acc_o, rows, thread_idx, st);
    } else {
      store_tile<kBlockM, Traits::kDimV, TiledMmaPV>(p, done, acc_o, rows, thread_idx);
    }
  }
}

}  // namespace mxattn::cuda::prefill
