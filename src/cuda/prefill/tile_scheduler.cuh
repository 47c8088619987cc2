// Which work one CTA does: its (batch, query tile, split) item from the plan's work list, with the
// key tiles that split covers (spec §3, from core/split_plan.h on the host), its query head, and
// the tile properties the main loop branches on. The plan orders the work list so that the items of
// one (batch, head) run next to each other (their K/V stay in L2) and, within it, the longest
// first.
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
  int64_t row_first = 0;
  int64_t row_last = 0;  // last row of the tile inside Sq
  core::Visibility vis;
  int64_t tile_first = 0;  // dense: key tiles [tile_first, tile_first + tile_count)
  int64_t tile_count = 0;
  const SparseTile* sparse = nullptr;  // sparse: the CTA's tile_count key tiles; dense: null
  uint32_t final_rows = 0;             // WorkItem's groups of 16 rows that store each output
  uint32_t partial_rows = 0;

  // Whether tile-local row r stores O and LSE, or this split's partials.
  __device__ bool writes_final(int r) const { return (final_rows >> (r / kSparseGranule)) & 1u; }
  __device__ bool writes_partial(int r) const {
    return (partial_rows >> (r / kSparseGranule)) & 1u;
  }
};

template <int kBlockM>
__device__ __forceinline__ CtaWork cta_work(const PrefillParams& p) {
  CtaWork w;
  const WorkItem item = p.work[blockIdx.x];
  w.b = item.b;
  w.h = item.head + int64_t(blockIdx.y);
  w.h_kv = w.h / p.group;
  w.q_tile = item.q_tile;
  w.split = item.split;
  w.row_first = w.q_tile * kBlockM;
  w.row_last = core::min64(p.seq_q, w.row_first + kBlockM) - 1;
  w.vis.last = item.last;
  w.vis.causal = p.causal;
  w.vis.offset = item.offset;
  w.vis.window = p.window;
  w.tile_first = item.tile_first;
  w.tile_count = item.tile_count;
  if (p.sparse_tiles != nullptr) w.sparse = p.sparse_tiles + item.tile_first;
  w.final_rows = item.final_rows;
  w.partial_rows = item.partial_rows;
  return w;
}

// Step k of a CTA's walk over its key tiles (0 <= k < tile_count, walked from last to first): the
// key tile and which of its keys the layout lists for each group of rows (all of them, dense).
struct KeyStep {
  int64_t tile = 0;
  uint64_t present = 0;
};

template <int kBlockM, int kBlockN>
struct SparseMasks {
  static constexpr int kGranules = (kBlockN + kSparseGranule - 1) / kSparseGranule;
  static constexpr int kRowGroups = kBlockM / kSparseGranule;
  static_assert(kBlockM % kSparseGranule == 0 && kGranules * kRowGroups <= 64,
                "a sparse key step holds one bit per 16 rows and 16 keys of the tile in 64 bits");
  static constexpr uint64_t kAll =
      kGranules * kRowGroups == 64 ? ~uint64_t(0) : (uint64_t(1) << (kGranules * kRowGroups)) - 1;
};

template <int kBlockM, int kBlockN>
__device__ __forceinline__ KeyStep key_step(const CtaWork& w, int64_t k) {
  if (w.sparse == nullptr) return {w.tile_first + k, SparseMasks<kBlockM, kBlockN>::kAll};
  const SparseTile t = w.sparse[k];
  return {t.key_tile, t.present};
}

// True when some row of the tile does not see every key of the step's key tile: the mask must run.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ bool tile_needs_mask(const CtaWork& w, const KeyStep& step) {
  // In 32 bits, like mask_scores (the API bounds Sk by 2^31 - 1, so a key tile starts at a
  // multiple of 16, at most 2^31 - 16): the two bounds the compiler holds across the main loop take
  // two registers, not four. Cutting the first row's last key to [-1, last] and the last row's
  // first key to [0, last + 1] changes no answer.
  const int key_first = int(step.tile) * kBlockN;
  const int first_row_hi = int(core::max64(w.vis.hi(w.row_first), -1));
  const int last_row_lo = int(core::min64(w.vis.lo(w.row_last), w.vis.last + 1));
  return key_first > first_row_hi - (kBlockN - 1) || key_first < last_row_lo ||
         step.present != SparseMasks<kBlockM, kBlockN>::kAll;
}

// Key rows of tile n past kv_len: their V rows are zeroed in shared memory before P V, since
// whatever that memory holds must not reach the output (0 * NaN is NaN).
template <int kBlockN>
__device__ __forceinline__ int first_invalid_key_row(const CtaWork& w, int64_t n) {
  const int64_t valid = w.vis.last + 1 - n * kBlockN;
  return valid >= kBlockN ? kBlockN : int(valid);
}

}  // namespace mxattn::cuda::prefill
