// The prefill kernel's schedule, built on the host from a validated problem and its spec §3
// partition (core/plan.h): one work item per (batch entry, CTA query tile, split) and, for a sparse
// layout that differs per head, per query head; the combine's table of every query tile's
// partition; and, with a sparse layout, each item's walk over key tiles with the 16 x 16 granules
// of rows and keys its layout lists. Plain C++, so that it can be checked on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan.h"
#include "cuda/prefill/prefill_params.h"

namespace mxattn::cuda::prefill {

// The kernel's work: one item per (batch entry, CTA query tile, split) and, for a layout that
// differs per head, per query head; the combine's table of every query tile's partition; and, with
// a sparse layout, each item's walk over key tiles.
struct Schedule {
  std::vector<TileInfo> tiles;  // [B, tile_heads, q_tiles]
  std::vector<WorkItem> work;
  std::vector<SparseTile> sparse_tiles;
  int64_t tile_heads = 1;
  bool any_combine = false;
};

// The schedule of CTAs of `cta_rows` query rows and key tiles of `key_tile` keys. A CTA holds one
// query tile of the partition (split.tile_m == cta_rows) or, with a sparse layout whose query
// blocks are smaller, several, each with its own splits and count: the CTA of split s then serves
// split s of each of them, and its work item says which rows store what. With `user_partials`
// every split of every query tile is written (unless split.early_exit), else only those that the
// combine reads.
Schedule build_schedule(const core::Problem& p, const core::SplitParams& split, int64_t cta_rows,
                        int64_t key_tile, bool user_partials);

}  // namespace mxattn::cuda::prefill
