// SPEC 2 on a tile of scores: S = -inf where key j is not visible from query row i, by
// core::Visibility (kv_len, the causal alignments, the sliding window), or where the sparse layout
// does not list j's block for i's query block (SPEC 2.4, the step's present bits). A select, never
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
  const int64_t key_first = step.tile * kBlockN;
#pragma unroll
  for (int r = 0; r < size<0>(s); ++r) {
    const int row = get<0>(c(r, 0));
    const int64_t i = w.row_first + row;
    const uint32_t present =
        uint32_t(step.present >> present_bit(row / kSparseGranule, 0, kGranules));
    // The row's visible keys relative to the tile, clamped to [-1, kBlockN].
    const int lo = int(core::max64(-1, core::min64(kBlockN, w.vis.lo(i) - key_first)));
    const int hi = int(core::max64(-1, core::min64(kBlockN, w.vis.hi(i) - key_first)));
#pragma unroll
    for (int col = 0; col < size<1>(s); ++col) {
      const int j = get<1>(c(0, col));
      if (j < lo || j > hi || !((present >> (j / kSparseGranule)) & 1u)) s(r, col) = -INFINITY;
    }
  }
}

}  // namespace mxattn::cuda::prefill
