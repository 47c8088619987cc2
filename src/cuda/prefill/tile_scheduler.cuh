// Which work one CTA does: its (batch, query tile, split) item from the plan's work list, with the
// key tiles that split covers (SPEC 3, from core/split_plan.h on the host), its query head, and the
// tile properties the main loop branches on. The plan orders the work list so that the items of one
// (batch, head) run next to each other (their K/V stay in L2) and, within it, the longest first.
#pragma once

#include <cstdint>

#include "core/visibility.h"
#include "cuda/prefill/prefill_params.h"

namespace mxattn::cuda::prefill {

struct CtaWork {
  int64_t b = 0;
  int64_t h = 0;
  int64_t h_kv = 0;
  int64_t q_tile = 0;
  int32_t split = 0;
  int32_t count = 0;  // exact valid-split count of the query tile
  int64_t row_first = 0;
  int64_t row_last = 0;  // last row of the tile inside Sq
  core::Visibility vis;
  int64_t tile_first = 0;  // key tiles [tile_first, tile_first + tile_count) of this split
  int64_t tile_count = 0;

  // Final outputs come from split 0 of a tile with at most one non-empty split; partials from
  // every split of a tile that is combined, or of every tile when the user asked for them.
  __device__ bool writes_final() const { return split == 0 && count <= 1; }
  __device__ bool writes_partial(bool all_partials) const { return count >= 2 || all_partials; }
};

template <int kBlockM>
__device__ __forceinline__ CtaWork cta_work(const PrefillParams& p) {
  CtaWork w;
  const WorkItem item = p.work[blockIdx.x];
  w.b = item.b;
  w.h = blockIdx.y;
  w.h_kv = w.h / p.group;
  w.q_tile = item.q_tile;
  w.split = item.split;
  w.count = item.count;
  w.row_first = w.q_tile * kBlockM;
  w.row_last = core::min64(p.seq_q, w.row_first + kBlockM) - 1;
  w.vis.last = item.last;
  w.vis.causal = p.causal;
  w.vis.offset = item.offset;
  w.vis.window = p.window;
  w.tile_first = item.tile_first;
  w.tile_count = item.tile_count;
  return w;
}

// True when some row of the tile does not see every key of key tile n: the mask must run.
template <int kBlockN>
__device__ __forceinline__ bool tile_needs_mask(const CtaWork& w, int64_t n) {
  const int64_t key_first = n * kBlockN;
  const int64_t key_last = key_first + kBlockN - 1;
  return key_last > w.vis.hi(w.row_first) || key_first < w.vis.lo(w.row_last);
}

// Key rows of tile n past kv_len: their V rows are zeroed in shared memory before P V, since
// whatever that memory holds must not reach the output (0 * NaN is NaN).
template <int kBlockN>
__device__ __forceinline__ int first_invalid_key_row(const CtaWork& w, int64_t n) {
  const int64_t valid = w.vis.last + 1 - n * kBlockN;
  return valid >= kBlockN ? kBlockN : int(valid);
}

}  // namespace mxattn::cuda::prefill
