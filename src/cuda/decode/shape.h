// Compile-time sizes of one instance of the split kernel: shared-memory layout and pipeline depth.
#pragma once

#include "cuda/decode/params.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

constexpr int clamp_int(int x, int lo, int hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
constexpr int max_int(int a, int b) {
  return a > b ? a : b;
}

// Whether a row of `chunks` 16-byte chunks fills whole passes of the warp's 32 lanes (row lengths
// of 128, 256 and 512 bytes), so that each lane copies one fixed chunk of every (32 / chunks)-th
// row (decode_load.cuh, copy_rows).
constexpr bool whole_row_passes(int chunks) {
  return chunks <= 32 && 32 % chunks == 0;
}

// kNarrow: the narrow MX kernel's shape (decode_narrow.cuh): about 9 KB of copies per warp (two
// stages of a 128-dim FP8 step, four of an FP4 one), four CTAs an SM. Its Q is only the B
// fragments of at most 8 rows (staged in the ring's last stage before the first step needs it), so
// that a D=128 CTA takes about 40 KB of shared memory and the rest of the SM's 256 KB serves as L1:
// with the largest shared-memory carveout forced, the same kernel ran 6.5% slower at 128k keys,
// and a third FP8 stage (56 KB a CTA) gained nothing.
template <DType KV, int DQK, int DV, bool kNarrow = false>
struct DecodeShape {
  static constexpr int kBits = bits_of(KV);
  static constexpr int kDimV = DV;
  static constexpr int kKRowBytes = DQK * kBits / 8;
  static constexpr int kVRowBytes = DV * kBits / 8;
  static constexpr int kKChunks = kKRowBytes / 16;  // 16-byte copies per key row
  static constexpr int kVChunks = kVRowBytes / 16;
  // MX caches copy a step's rows by lane pairs (32 contiguous bytes per row and copy, one row
  // pointer per lane); 16-bit caches keep whole rows per half warp: the build that used paired
  // copies for them too decoded bf16 25% slower.
  // The narrow kernel copies whole rows where they fill whole passes of the warp (FP8 and FP4),
  // chosen with its four-CTA shape and not measured apart from it: its step took 553 instructions
  // against 549 with paired copies at three CTAs.
  static constexpr bool kPairedCopies =
      is_mx(KV) && kKChunks % 2 == 0 && kVChunks % 2 == 0 &&
      !(kNarrow && whole_row_passes(kKChunks) && whole_row_passes(kVChunks));
  // MX scales of a step ride in the stage, after the rows, when every key's scale row is a whole
  // number of 4-byte words: K [16 keys][Dqk/32]; V [16 keys][Dv/32] along the head dim, or the
  // step's key block [Dv] along the keys.
  static constexpr bool kScalesInStage = is_mx(KV) && DQK % 128 == 0 && DV % 128 == 0;
  static constexpr int kKScaleBytes = kStepKeys * DQK / 32;
  static constexpr int kVScaleBytes = max_int(kStepKeys * DV / 32, DV);
  static constexpr int kRowBytes = kStepKeys * (kKRowBytes + kVRowBytes);
  static constexpr int kStepBytes = kRowBytes + (kScalesInStage ? kKScaleBytes + kVScaleBytes : 0);
  // Per row: each warp's max and sum, the row's exponent and LSE, its query row and head; per
  // warp: its merge stage.
  static constexpr int kStatsBytes = (2 * kWarps + 4) * kRowsPerBlock * 4 + kWarps * 4;
  // Q: the general kernel's hi and lo A fragments and its f32 stage of 16 rows; the narrow
  // kernel's hi and lo B fragments (8 rows; staged in the ring, build_q_narrow in
  // decode_narrow.cuh).
  static constexpr int kKSteps = DQK / 16;  // k16 steps of Q K^T
  static constexpr int kQFragBytes = kNarrow ? DQK * 32 : 2 * kKSteps * 32 * 16;
  static constexpr int kQStageBytes = kNarrow ? 0 : kRowsPerBlock * DQK * 4;
  // About 24 KB of copies per warp for 16-bit caches (two CTAs per SM cover DRAM latency at full
  // bandwidth); 16 KB for MX caches, whose steps cost more arithmetic, so that three CTAs fit.
  static constexpr int kStages = clamp_int((kNarrow     ? 8960
                                            : is_mx(KV) ? 16384
                                                        : 24576) /
                                               kStepBytes,
                                           2, 4);
  static constexpr int kRingBytes = kWarps * kStages * kStepBytes;

  static constexpr int kKBlocks = DQK / 32;  // MX blocks (and 8-element lane groups) per key row
  static constexpr int kVChunksOf64 = DV / 64;
  static constexpr int kOTiles = DV / 8;

  // The warps' states are merged through shared memory, 16 rows of f32 per warp, swizzled
  // (merge_index in decode_kernel.cuh). After a CTA's last split the whole ring holds the four
  // warps' rows at once. Between two splits of a chain the copies of the next split are in flight
  // and only the stage each warp has just consumed is free: the rows go through it kMergeChunk
  // dims at a time.
  static constexpr int kMergeBytes = kWarps * kRowsPerBlock * DV * 4;
  static constexpr int kLoopBytes = max_int(kRingBytes, kMergeBytes);
  static constexpr int kMergeChunk = [] {
    int c = DV;
    while (c > 8 && kRowsPerBlock * c * 4 > kStepBytes) c /= 2;
    return c;
  }();
  static_assert(kRowsPerBlock * kMergeChunk * 4 <= kStepBytes && DV % kMergeChunk == 0);
  // Whether a CTA may compute several consecutive splits (WorkItem::chain). Not the MX kernels: at
  // the 168 registers of three CTAs an SM, the chain's copy cursor made ptxas spill in their main
  // loop and they ran 12-16% slower even at one split a CTA.
  static constexpr bool kChains = !is_mx(KV);
  static constexpr int kSmemBytes = kLoopBytes + kQFragBytes + kQStageBytes + kStatsBytes;
  // CTAs per SM the register budget must allow: as many as the shared memory holds (228 KB per SM,
  // 1 KB of it reserved per CTA), at most three (168 registers a thread; four, 128 registers, for
  // the narrow kernel), at least two.
  static constexpr int kMinBlocksPerSm =
      clamp_int(233472 / (kSmemBytes + 1024), 2, kNarrow ? 4 : 3);
};

}  // namespace mxattn::cuda::detail
