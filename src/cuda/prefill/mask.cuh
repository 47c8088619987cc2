// spec §2 on a tile of scores: S = -inf where key j is not visible from query row i, by
// core::Visibility (kv_len, the causal alignments, the sliding window), or where the sparse layout
// does not list j's block for i's query block (spec §2.4, the step's present bits). A select, never
// an add, so a NaN read from memory past kv_len cannot survive it. Runs only on tiles
// tile_needs_mask flags.
#pragma once

#include <cute/tensor.hpp>

#include <cmath>
#include <cstdint>

#include "core/visibility.h"
#include "cuda/prefill/fragments.cuh"
#include "cuda/prefill/tile_scheduler.cuh"

namespace mxattn::cuda::prefill {

template <int kBlockM, int kBlockN, class TiledMma, class FragS>
__device__ __forceinline__ void mask_scores(FragS& scores, const CtaWork& w, const KeyStep& step,
                                            int thread_idx) {
  constexpr int kGranules = SparseMasks<kBlockM, kBlockN>::kGranules;
  const auto coords = TiledMma{}
                          .get_thread_slice(thread_idx)
                          .partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  auto s = rows_cols_view(scores);
  const auto c = rows_cols_view(coords);
  // A thread's columns are its first one, 2 (lane % 4), plus compile-time offsets 8 g + {0, 1}
  // (the wgmma accumulator layout). Tested relative to that first column, every per-column value
  // below is a constant after unrolling: otherwise the compiler hoists every column's index and
  // granule bit out of the main loop, and at Dqk 256 they spill.
  const int col_first = get<1>(c(0, 0));
  // Key positions in 32 bits (the API bounds Sk by 2^31 - 1, so a key tile starts at a multiple
  // of 16, at most 2^31 - 16, and the first column is under 8): what the compiler hoists out of
  // the main loop per row is then one register, not two.
  const int key_first = int(step.tile) * kBlockN + col_first;
#pragma unroll
  for (int r = 0; r < size<0>(s); ++r) {
    const int row = get<0>(c(r, 0));
    const int64_t i = w.row_first + row;
    const uint32_t present =
        uint32_t(step.present >> present_bit(row / kSparseGranule, 0, kGranules));
    // The row's visible keys [lo, hi] cut to [0, last + 1] and [-1, last], which keeps the keys it
    // sees, then taken relative to the thread's first column and clamped to [-1, kBlockN].
    const int row_lo = int(core::min64(w.vis.lo(i), w.vis.last + 1));
    const int row_hi = int(core::max64(w.vis.hi(i), -1));
    const int lo = max(-1, min(kBlockN, row_lo - key_first));
    const int hi = max(-1, min(kBlockN, row_hi - key_first));
#pragma unroll
    for (int col = 0; col < size<1>(s); ++col) {
      const int j = get<1>(c(0, col)) - col_first;
      // Key col_first + j lies in granule j / 16: col_first + j % 8 < 8 and granules are 16 wide.
      if (j < lo || j > hi || !((present >> (j / kSparseGranule)) & 1u)) s(r, col) = -INFINITY;
    }
  }
}

}  // namespace mxattn::cuda::prefill
