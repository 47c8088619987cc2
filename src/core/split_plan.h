// spec §3: the split-KV partition and the valid-split counts. Defined once, here, as host/device
// functions: the CPU engines, the CUDA kernels, the combine and `mxattn plan` all call these.
#pragma once

#include <cstdint>

#include "core/visibility.h"
#include "mxattn/config.h"

namespace mxattn::core {

// A query tile's key tiles, as a contiguous run of positions [begin, begin + count) in its list.
// Dense: position p is key tile p (keys [p * tile_n, (p + 1) * tile_n)). Sparse: position p is
// col_idx[p] of the tile's query block, whose listed blocks intersecting [lo, hi] are contiguous
// because col_idx is sorted.
struct TileRun {
  int64_t begin = 0;
  int64_t count = 0;
};

// Key tiles of a dense query tile holding rows [row_first, row_last].
MXATTN_HD constexpr TileRun dense_key_tiles(const Visibility& vis, int64_t row_first,
                                            int64_t row_last, int64_t tile_n) {
  const int64_t hi = vis.hi(row_last);
  const int64_t lo = vis.lo(row_first);
  if (hi < lo) return {0, 0};
  return {lo / tile_n, hi / tile_n - lo / tile_n + 1};
}

// Key tiles of a sparse query tile: the listed blocks cols[0..n) (sorted, block size block_k)
// intersecting [lo(row_first), hi(row_last)]; positions are indices into cols.
MXATTN_HD constexpr TileRun sparse_key_tiles(const Visibility& vis, int64_t row_first,
                                             int64_t row_last, const int32_t* cols, int64_t n,
                                             int64_t block_k) {
  const int64_t hi = vis.hi(row_last);
  const int64_t lo = vis.lo(row_first);
  if (hi < lo) return {0, 0};
  int64_t begin = 0;
  while (begin < n && (int64_t(cols[begin]) + 1) * block_k - 1 < lo) ++begin;
  int64_t end = begin;
  while (end < n && int64_t(cols[end]) * block_k <= hi) ++end;
  return {begin, end - begin};
}

// Tiles per split: iters = ceil(n / split_kv).
MXATTN_HD constexpr int64_t split_iters(int64_t n, int64_t split_kv) {
  return n == 0 ? 0 : ceil_div(n, split_kv);
}

// Splits [s, s + splits) of a run cut into `iters` tiles per split (split_iters): list positions
// [s * iters, min(n, (s + splits) * iters)), empty at the run's end when none is left.
MXATTN_HD constexpr TileRun consecutive_split_tiles(TileRun run, int64_t iters, int64_t s,
                                                    int64_t splits) {
  const int64_t first = s * iters;
  const int64_t last = min64(run.count, (s + splits) * iters);
  if (first >= last) return {run.begin + run.count, 0};
  return {run.begin + first, last - first};
}

// Split s covers list positions [s * iters, min(n, (s + 1) * iters)) of the tile's run.
MXATTN_HD constexpr TileRun split_tiles(TileRun run, int64_t split_kv, int64_t s) {
  return consecutive_split_tiles(run, split_iters(run.count, split_kv), s, 1);
}

// Exact count: the number of splits holding any tile (0 when n = 0).
MXATTN_HD constexpr int64_t valid_split_count(int64_t n, int64_t split_kv) {
  return n == 0 ? 0 : ceil_div(n, split_iters(n, split_kv));
}

// rocMLIR's conservative per-row count. It may exceed the exact count of the row's tile, so it is
// valid only when every split was written.
MXATTN_HD constexpr int64_t conservative_split_count(const Visibility& vis, int64_t row,
                                                     int64_t tile_n, int64_t split_kv) {
  if (vis.last < 0) return 0;
  int64_t row_last = vis.last;
  if (vis.causal) row_last = max64(0, min64(row + vis.offset, vis.last));
  const int64_t keys = row_last + 1;
  const int64_t keys_per_split = tile_n * ceil_div(ceil_div(keys, tile_n), split_kv);
  return ceil_div(keys, keys_per_split);
}

// split_kv = auto: the tile's own key-tile count over a fixed target, never the rest of the batch,
// so each sequence's result is the same whatever else is in the batch.
MXATTN_HD constexpr int64_t auto_split_kv(int64_t n, int64_t target_tiles_per_split,
                                          int64_t max_splits) {
  return max64(1, min64(max_splits, ceil_div(n, target_tiles_per_split)));
}

// The parameters of an engine's partition; `split_kv` 0 means auto.
struct SplitParams {
  int64_t tile_m = 64;
  int64_t tile_n = 64;
  int64_t split_kv = 1;
  int64_t target_tiles_per_split = 8;
  int64_t max_splits = 64;
  bool early_exit = false;

  MXATTN_HD constexpr int64_t splits_for(int64_t n_tiles) const {
    return split_kv > 0 ? split_kv : auto_split_kv(n_tiles, target_tiles_per_split, max_splits);
  }
};

}  // namespace mxattn::core
