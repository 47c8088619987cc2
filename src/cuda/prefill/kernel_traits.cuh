// Compile-time shape of one prefill kernel instance: tile sizes, warp roles, the wgmma tiled MMAs,
// the swizzled shared-memory layouts the TMA writes and the tensor cores read, and the shared
// storage. Everything that varies with (element type, Dqk, Dv) lives here and nowhere else.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include <cstdint>

#include "cuda/common/head_dims.h"

namespace mxattn::cuda::prefill {

using namespace cute;

// kQCodes_: Q arrives as MX codes with E8M0 scales, which the math warp groups dequantize into
// Q's shared tile themselves (q_codes.cuh) instead of a tensor copy of a dequantized Q (bf16 only).
template <class Element_, int kDimQK_, int kDimV_, bool kQCodes_ = false>
struct KernelTraits {
  using Element = Element_;  // cutlass::bfloat16_t or cutlass::half_t
  static constexpr int kDimQK = kDimQK_;
  static constexpr int kDimV = kDimV_;
  static constexpr bool kQCodes = kQCodes_;
  static constexpr int kBlockM = kPrefillTileM;
  static constexpr int kBlockN = prefill_key_tile(kDimQK);
  static constexpr int kStages = 2;

  // Warp group 0 loads (one elected thread issues every TMA copy); warp groups 1.. each own 64
  // query rows of the tile, the M extent of one wgmma.
  static constexpr int kMmaWarpGroups = kBlockM / 64;
  static constexpr int kMmaThreads = kMmaWarpGroups * 128;
  static constexpr int kThreads = kMmaThreads + 128;
  // Registers per thread after setmaxnreg: the loader gives its share to the math warp groups.
  static constexpr int kLoadRegisters = kMmaWarpGroups == 2 ? 24 : 32;
  static constexpr int kMmaRegisters = kMmaWarpGroups == 2 ? 240 : 160;
  // Ping-pong: the math warp groups take turns issuing their GEMMs, so one group's softmax runs
  // under the other's GEMMs. Past Dqk 128 the GEMMs are long enough that it does not pay.
  static constexpr bool kSchedulerBarrier = kDimQK <= 128;
  // Where O is brought to a key tile's new row maximum: past Dv 128 (64+ accumulator registers a
  // row pair) while the next S GEMM runs, before the P V GEMM is issued, rather than after that
  // GEMM has completed, where the multiplies would hold up the next tile's GEMMs.
  static constexpr bool kRescaleBeforePv = kDimV > 128;

  using TileShapeQK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kDimQK>>;
  using TileShapePV = Shape<Int<kBlockM>, Int<kDimV>, Int<kBlockN>>;
  using MmaAtomLayout = Layout<Shape<Int<kMmaWarpGroups>, _1, _1>>;
  // S = Q K^T with both operands in shared memory; O += P V with P from registers and V read
  // transposed (MN-major), as stored: keys by rows, head dim contiguous.
  using TiledMmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, TileShapeQK>(), MmaAtomLayout{}));
  using TiledMmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, TileShapePV, GMMA::Major::K, GMMA::Major::MN>(),
      MmaAtomLayout{}));
  static_assert(size(TiledMmaQK{}) == kMmaThreads && size(TiledMmaPV{}) == kMmaThreads);
  // One wgmma spans the whole key tile (S) and head dim (O): the selector falls back to narrow
  // atoms, each re-reading its A operand, for an N it lacks (N = 80 needs the extended shapes,
  // CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED).
  static_assert(size<1>(typename TiledMmaQK::AtomShape_MNK{}) == kBlockN);
  static_assert(size<1>(typename TiledMmaPV::AtomShape_MNK{}) == kDimV);

  static_assert(kDimQK % 64 == 0 && kDimV % 64 == 0, "head dims are whole 128-byte swizzle rows");
  using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<kBlockM>, Int<kDimQK>>{}));
  using SmemLayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<kBlockN>, Int<kDimQK>, Int<kStages>>{}));
  // V^T: (head dim, keys, stage), the head dim contiguous in 128-byte swizzled rows.
  using SmemLayoutVt =
      decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                             Shape<Int<kDimV>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{}));

  static constexpr uint32_t kBytesQ = uint32_t(cosize_v<SmemLayoutQ> * sizeof(Element));
  static constexpr uint32_t kBytesK = uint32_t(kBlockN * kDimQK * sizeof(Element));
  static constexpr uint32_t kBytesV = uint32_t(kBlockN * kDimV * sizeof(Element));

  // 128-byte swizzle repeats every 1024 bytes: each buffer starts on that boundary.
  struct SharedStorage {
    alignas(1024) Element q[cosize_v<SmemLayoutQ>];
    alignas(1024) Element k[cosize_v<SmemLayoutK>];
    alignas(1024) Element v[cosize_v<SmemLayoutVt>];
    cutlass::arch::ClusterTransactionBarrier q_full;
    cutlass::arch::ClusterTransactionBarrier k_full[kStages];
    cutlass::arch::ClusterTransactionBarrier v_full[kStages];
    cutlass::arch::ClusterBarrier k_empty[kStages];
    cutlass::arch::ClusterBarrier v_empty[kStages];
  };
  // The dynamic shared memory base is only 16-byte aligned: the kernel rounds it up to 1024.
  static constexpr int kSmemBytes = int(sizeof(SharedStorage)) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared storage exceeds the H200's 227 KB per block");
};

}  // namespace mxattn::cuda::prefill
