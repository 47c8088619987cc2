// The split plan of a validated problem: tile sizes resolved, and each query tile's key-tile run
// and split count, from the rules of split_plan.h. Used by every engine and by `mxattn plan`.
#pragma once

#include <cstdint>

#include "core/problem.h"
#include "core/split_plan.h"

namespace mxattn::core {

// Resolves the user's SplitOptions against an engine's default tile sizes and its fixed auto-split
// target (key tiles per split). With a sparse layout the key tile is the sparse block
// (tile_n = block_k) and a query tile never spans two query blocks.
inline SplitParams resolve_split(
    const Problem& p, int64_t default_tile_m, int64_t default_tile_n,
    int64_t target_tiles_per_split = SplitParams{}.target_tiles_per_split) {
  SplitParams s;
  const SplitOptions& o = p.args.split;
  s.target_tiles_per_split = o.auto_target > 0 ? o.auto_target : target_tiles_per_split;
  s.tile_m = o.tile_m > 0 ? o.tile_m : default_tile_m;
  s.tile_n = o.tile_n > 0 ? o.tile_n : default_tile_n;
  s.split_kv = o.split_kv;
  s.early_exit = o.early_exit;
  if (p.sparse) {
    s.tile_n = p.args.sparse.block_k;
    while (s.tile_m > p.args.sparse.block_q) s.tile_m /= 2;
    while (p.args.sparse.block_q % s.tile_m != 0) --s.tile_m;
  }
  return s;
}

// One query tile: rows [row_first, row_last] of (b, h), its key-tile run and its split count.
struct QueryTile {
  int64_t b = 0;
  int64_t h = 0;
  int64_t row_first = 0;
  int64_t row_last = 0;
  Visibility vis;
  TileRun run;                    // positions of its key tiles
  const int32_t* cols = nullptr;  // sparse: key block of each position; dense: nullptr
  int64_t splits = 1;             // split_kv of this tile (auto resolved)
  int64_t count = 0;              // exact valid-split count

  // First key of the tile at list position `pos` (block index times tile size).
  int64_t key_tile(int64_t pos) const { return cols ? cols[pos] : pos; }
};

inline int64_t query_tiles_per_head(const Problem& p, const SplitParams& s) {
  return ceil_div(p.seq_q, s.tile_m);
}

inline QueryTile query_tile(const Problem& p, const SplitParams& s, int64_t b, int64_t h,
                            int64_t t) {
  QueryTile q;
  q.b = b;
  q.h = h;
  q.row_first = t * s.tile_m;
  q.row_last = min64(p.seq_q, (t + 1) * s.tile_m) - 1;
  q.vis = p.visibility(b);
  if (p.sparse) {
    const Problem::SparseRow row = p.sparse_row(b, h, q.row_first / p.args.sparse.block_q);
    q.cols = row.cols;
    q.run = sparse_key_tiles(q.vis, q.row_first, q.row_last, row.cols, row.count, s.tile_n);
  } else {
    q.run = dense_key_tiles(q.vis, q.row_first, q.row_last, s.tile_n);
  }
  q.splits = s.splits_for(q.run.count);
  q.count = valid_split_count(q.run.count, q.splits);
  return q;
}

// The number of partial slots S the plan needs: the largest split_kv over its query tiles.
inline int64_t partial_slots(const Problem& p, const SplitParams& s) {
  if (s.split_kv > 0) return s.split_kv;
  int64_t slots = 1;
  const int64_t tiles = query_tiles_per_head(p, s);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t t = 0; t < tiles; ++t) slots = max64(slots, query_tile(p, s, b, h, t).splits);
  return slots;
}

}  // namespace mxattn::core
