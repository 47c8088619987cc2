// Compile-time sizes of one instance of the split kernel: shared-memory layout and pipeline depth.
#pragma once

#include "cuda/decode_params.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

constexpr int clamp_int(int x, int lo, int hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
constexpr int max_int(int a, int b) {
  return a > b ? a : b;
}

template <DType KV, int DQK, int DV>
struct DecodeShape {
  static constexpr int kBits = bits_of(KV);
  static constexpr int kKRowBytes = DQK * kBits / 8;
  static constexpr int kVRowBytes = DV * kBits / 8;
  static constexpr int kKChunks = kKRowBytes / 16;  // 16-byte copies per key row
  static constexpr int kVChunks = kVRowBytes / 16;
  static constexpr int kStepBytes = kStepKeys * (kKRowBytes + kVRowBytes);
  // About 24 KB of copies in flight per warp: enough to cover DRAM latency at full bandwidth with
  // two CTAs per SM, without starving occupancy.
  static constexpr int kStages = clamp_int(24576 / kStepBytes, 2, 4);
  static constexpr int kRingBytes = kWarps * kStages * kStepBytes;

  static constexpr int kKSteps = DQK / 16;   // k16 steps of Q K^T
  static constexpr int kKBlocks = DQK / 32;  // MX blocks (and 8-element lane groups) per key row
  static constexpr int kVChunksOf64 = DV / 64;
  static constexpr int kOTiles = DV / 8;

  // After the main loop the ring is reused to merge the warps' states; its rows are padded by 4
  // floats so that the lanes of a fragment land in different banks.
  static constexpr int kMergeStride = DV + 4;
  static constexpr int kMergeBytes = kWarps * kRowsPerBlock * kMergeStride * 4;
  static constexpr int kLoopBytes = max_int(kRingBytes, kMergeBytes);
  static constexpr int kQFragBytes = 2 * kKSteps * 32 * 16;  // hi and lo A fragments
  static constexpr int kQStageBytes = kRowsPerBlock * DQK * 4;
  static constexpr int kStatsBytes = (2 * kWarps + 2) * kRowsPerBlock * 4;
  static constexpr int kSmemBytes = kLoopBytes + kQFragBytes + kQStageBytes + kStatsBytes;
};

}  // namespace mxattn::cuda::detail
