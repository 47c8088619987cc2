// The main loop, warp specialized. The loader (one elected thread) streams Q once and the CTA's key
// tiles, last to first, through a two-stage ring of K and V buffers with the bulk tensor copy
// engine; the math warp groups run, per key tile, S = Q K^T and O += P V on the tensor cores with
// the online softmax between them. Two overlaps hide the softmax: within a warp group, the S GEMM
// of tile n is in flight while the P V GEMM of tile n + 1 runs and the softmax of tile n follows
// (FlashAttention-3's intra-warpgroup pipelining); across warp groups, a named-barrier ping-pong
// lets one group's softmax run while the other issues its GEMMs. The first of the two exists only
// in the source: ptxas (nvcc 13.0) moves the wait for the P V GEMM above the softmax, so the
// machine code runs the softmax once that GEMM has completed (docs/design.md; the CI test
// tests/cuda/check_prefill_sass.py counts the exponentials ahead of the wait). Forcing the wait
// below the softmax measured slower, so the hoisted wait stays.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/tensor.hpp>

#include <cstdint>

#include "cuda/prefill/fragments.cuh"
#include "cuda/prefill/mask.cuh"
#include "cuda/prefill/q_codes.cuh"
#include "cuda/prefill/softmax.cuh"
#include "cuda/prefill/tile_scheduler.cuh"

namespace mxattn::cuda::prefill {

using namespace cute;

// Named barriers (ids past CUTLASS's reserved ones): all math threads, then one per warp group for
// the ping-pong.
inline constexpr uint32_t kMathBarrier = 0;
inline constexpr uint32_t kSchedulerBarrierBase = 1;

// Position in the K/V ring: the stage and the parity of its current use. Loader and math threads
// step through the same sequence, one step per key tile, for K and V alike.
struct RingState {
  int index = 0;
  uint32_t phase = 0;
  template <int kStages>
  __device__ __forceinline__ void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1u;
    }
  }
};

// Issues the k16 steps of one warpgroup GEMM, C (+)= A B, without waiting for it.
template <bool kZeroInit, class TiledMma, class FragA, class FragB, class FragC>
__device__ __forceinline__ void issue_gemm(TiledMma& mma, FragA& a, const FragB& b, FragC& c) {
  constexpr bool kRegisterA =
      !std::is_base_of_v<GMMA::DescriptorIterator, typename TiledMma::FrgTypeA>;
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
#pragma unroll
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
}

// The TMA views of one CTA: Q's tile and the (batch, KV head)'s key tiles, as copy sources.
template <class Traits, class Args>
__device__ __forceinline__ auto tma_views(const Args& args, const CtaWork& w,
                                          typename Traits::SharedStorage& st) {
  const PrefillParams& p = args.params;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  constexpr int kDimQK = Traits::kDimQK, kDimV = Traits::kDimV;
  Tensor sQ = make_tensor(make_smem_ptr(st.q), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(st.k), typename Traits::SmemLayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(st.v), typename Traits::SmemLayoutVt{});
  Tensor mQ = args.tma_q.get_tma_tensor(
      make_shape(int(p.seq_q), int(kDimQK), int(p.heads_q), int(p.batch)))(_, _, w.h, w.b);
  Tensor mK = args.tma_k.get_tma_tensor(
      make_shape(int(p.seq_k), int(kDimQK), int(p.heads_kv), int(p.batch)))(_, _, w.h_kv, w.b);
  Tensor mVt = args.tma_v.get_tma_tensor(
      make_shape(int(kDimV), int(p.seq_k), int(p.heads_kv), int(p.batch)))(_, _, w.h_kv, w.b);
  Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kDimQK>>{}, make_coord(int(w.q_tile), 0));
  Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<kDimQK>>{}, make_coord(_, 0));
  Tensor gVt = local_tile(mVt, Shape<Int<kDimV>, Int<kBlockN>>{}, make_coord(0, _));
  auto [q_src, q_dst] = tma_partition(args.tma_q, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
  auto [k_src, k_dst] = tma_partition(args.tma_k, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto [v_src, v_dst] = tma_partition(args.tma_v, group_modes<0, 2>(sVt), group_modes<0, 2>(gVt));
  return make_tuple(q_src, q_dst, k_src, k_dst, v_src, v_dst);
}

// The loader: Q (unless the math warp groups dequantize it, kQCodes), then K of the last key step,
// then each further K ahead of the V of the step before it, in the order the math warp groups
// consume them.
template <class Traits, class Args>
__device__ __forceinline__ void load_tiles(const Args& args, const CtaWork& w,
                                           typename Traits::SharedStorage& st) {
  auto [q_src, q_dst, k_src, k_dst, v_src, v_dst] = tma_views<Traits>(args, w, st);
  if constexpr (!Traits::kQCodes) {
    st.q_full.arrive_and_expect_tx(Traits::kBytesQ);
    copy(args.tma_q.with(reinterpret_cast<uint64_t&>(st.q_full)), q_src, q_dst);
  }

  // K and V are read by every query tile of the head: keep them in L2.
  constexpr auto kKeep = TMA::CacheHintSm90::EVICT_LAST;
  const auto load_k = [&](int64_t n, const RingState& s) {
    st.k_empty[s.index].wait(s.phase ^ 1u);
    st.k_full[s.index].arrive_and_expect_tx(Traits::kBytesK);
    copy(args.tma_k.with(reinterpret_cast<uint64_t&>(st.k_full[s.index]), 0, kKeep), k_src(_, n),
         k_dst(_, s.index));
  };
  const auto load_v = [&](int64_t n, const RingState& s) {
    st.v_empty[s.index].wait(s.phase ^ 1u);
    st.v_full[s.index].arrive_and_expect_tx(Traits::kBytesV);
    copy(args.tma_v.with(reinterpret_cast<uint64_t&>(st.v_full[s.index]), 0, kKeep), v_src(_, n),
         v_dst(_, s.index));
  };
  const auto tile_at = [&](int64_t k) {
    return key_step<Traits::kBlockM, Traits::kBlockN>(w, k).tile;
  };
  RingState k_ring, v_ring;
  int64_t next_v = tile_at(w.tile_count - 1);
  load_k(next_v, k_ring);
  k_ring.advance<Traits::kStages>();
  for (int64_t k = w.tile_count - 2; k >= 0; --k) {
    const int64_t n = tile_at(k);
    load_k(n, k_ring);
    k_ring.advance<Traits::kStages>();
    load_v(next_v, v_ring);
    v_ring.advance<Traits::kStages>();
    next_v = n;
  }
  load_v(next_v, v_ring);
}

// Zeroes V's key rows [first_row, kBlockN) of one stage (keys past kv_len), then makes the writes
// visible to the tensor cores and waits for every math thread.
template <class Traits, class TensorVt>
__device__ __forceinline__ void zero_invalid_v_rows(TensorVt& sVt, int stage, int first_row,
                                                    int thread_idx) {
  using Element = typename Traits::Element;
  // 16 bytes at a time: eight head-dim elements from a multiple of 8 stay one aligned 16-byte
  // chunk under the 128-byte swizzle of V's rows (the head dim is the contiguous mode).
  constexpr int kChunk = 16 / int(sizeof(Element));
  constexpr int kChunks = Traits::kDimV / kChunk;
  static_assert(Traits::kDimV % kChunk == 0);
  // Rolled: a path that runs once per CTA at most, whose unrolled addresses would cost registers
  // the code around it (Dqk 256) does not have.
#pragma unroll 1
  for (int idx = thread_idx; idx < (Traits::kBlockN - first_row) * kChunks;
       idx += Traits::kMmaThreads) {
    Element* const chunk = &sVt(kChunk * (idx % kChunks), first_row + idx / kChunks, stage);
    *reinterpret_cast<uint4*>(chunk) = make_uint4(0, 0, 0, 0);
  }
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(Traits::kMmaThreads, kMathBarrier);
}

// The math warp groups: all key tiles of the CTA into O (unnormalized) and the softmax state.
template <class Traits, class FragO, class Softmax>
__device__ __forceinline__ void compute_tiles(const PrefillParams& p, const CtaWork& w,
                                              typename Traits::SharedStorage& st, int thread_idx,
                                              FragO& acc_o, Softmax& softmax) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  constexpr int kStages = Traits::kStages;
  using TiledMmaQK = typename Traits::TiledMmaQK;
  typename Traits::TiledMmaQK mma_qk;
  typename Traits::TiledMmaPV mma_pv;
  const int warp_group = __shfl_sync(0xffffffffu, thread_idx / 128, 0);
  const auto wg_qk = mma_qk.get_slice(warp_group * 128);
  const auto wg_pv = mma_pv.get_slice(warp_group * 128);
  Tensor sQ = make_tensor(make_smem_ptr(st.q), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(st.k), typename Traits::SmemLayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(st.v), typename Traits::SmemLayoutVt{});
  Tensor q_frag = wg_qk.partition_fragment_A(sQ);
  Tensor k_frag = wg_qk.partition_fragment_B(sK);
  Tensor v_frag = wg_pv.partition_fragment_B(sVt);
  Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor p_frag = make_tensor<Element>(acc_as_a_operand(acc_s.layout()));

  const bool last_group = warp_group == Traits::kMmaWarpGroups - 1;
  const auto scheduler_sync = [&] {
    if constexpr (Traits::kSchedulerBarrier) {
      cutlass::arch::NamedBarrier::sync(256, kSchedulerBarrierBase + warp_group);
    }
  };
  const auto scheduler_arrive = [&] {
    if constexpr (Traits::kSchedulerBarrier) {
      const int next = last_group ? 0 : warp_group + 1;
      cutlass::arch::NamedBarrier::arrive(256, kSchedulerBarrierBase + next);
    }
  };
  // Each warp releases a stage once its warp group's GEMM on it has completed.
  const auto release = [](cutlass::arch::ClusterBarrier& empty) {
    __syncwarp();
    if (cute::elect_one_sync()) empty.arrive();
  };
  const auto mask_and_softmax = [&](const KeyStep& step, float(&rescale)[Softmax::kRowCount]) {
    if (tile_needs_mask<kBlockM, kBlockN>(w, step))
      mask_scores<kBlockM, kBlockN, TiledMmaQK>(acc_s, w, step, thread_idx);
    softmax.step(acc_s, p.scale_log2, rescale);
  };

  // The first warp group goes first in the ping-pong.
  if (Traits::kSchedulerBarrier && warp_group == 0 && w.tile_count > 1) {
    cutlass::arch::NamedBarrier::arrive(256, kSchedulerBarrierBase);
  }
  if constexpr (Traits::kQCodes) {
    dequantize_q<Traits>(p, w, st, thread_idx, kMathBarrier);
  } else {
    st.q_full.wait(0);
  }
  float rescale[Softmax::kRowCount];
  RingState ring;
  KeyStep step = key_step<kBlockM, kBlockN>(w, w.tile_count - 1);
  st.k_full[ring.index].wait(ring.phase);
  issue_gemm<true>(mma_qk, q_frag, k_frag(_, _, _, ring.index), acc_s);
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc_s);
  release(st.k_empty[ring.index]);
  mask_and_softmax(step, rescale);
  round_pairs<Element>(acc_s, p_frag);
  // Keys past kv_len: V's rows are zeroed before P V. Only the CTA's highest key tile, its first
  // step, can reach past kv_len, and only a kv_len below Sk leaves rows to zero: past Sk the
  // tensor copy fills them with zeros. (Zeroing the last tile of 4096 keys at Dqk 256, whose
  // 80-key tiles do not divide it, cost every CTA 7-8% of its time.)
  if (w.vis.last + 1 < p.seq_k) {
    const int first_row = first_invalid_key_row<kBlockN>(w, step.tile);
    if (first_row < kBlockN) {
      st.v_full[ring.index].wait(ring.phase);
      zero_invalid_v_rows<Traits>(sVt, ring.index, first_row, thread_idx);
    }
  }

  for (int k = int(w.tile_count) - 2; k >= 0; --k) {
    const RingState ring_v = ring;  // V of step k + 1
    ring.advance<kStages>();        // K of step k
    step = key_step<kBlockM, kBlockN>(w, k);
    st.k_full[ring.index].wait(ring.phase);
    scheduler_sync();
    issue_gemm<true>(mma_qk, q_frag, k_frag(_, _, _, ring.index), acc_s);
    // O to the maximum of step k + 1 before its P V (in the first turn O is still zeros).
    if constexpr (Traits::kRescaleBeforePv) softmax.rescale_output(acc_o, rescale);
    st.v_full[ring_v.index].wait(ring_v.phase);
    issue_gemm<false>(mma_pv, p_frag, v_frag(_, _, _, ring_v.index), acc_o);
    // The last group's final turn has no successor.
    if (!(last_group && k == 0)) scheduler_arrive();
    warpgroup_wait<1>();
    warpgroup_fence_operand(acc_s);
    release(st.k_empty[ring.index]);
    mask_and_softmax(step, rescale);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    release(st.v_empty[ring_v.index]);
    if constexpr (!Traits::kRescaleBeforePv) softmax.rescale_output(acc_o, rescale);
    round_pairs<Element>(acc_s, p_frag);
  }

  if constexpr (Traits::kRescaleBeforePv) softmax.rescale_output(acc_o, rescale);
  st.v_full[ring.index].wait(ring.phase);
  issue_gemm<false>(mma_pv, p_frag, v_frag(_, _, _, ring.index), acc_o);
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc_o);
  release(st.v_empty[ring.index]);
}

}  // namespace mxattn::cuda::prefill
