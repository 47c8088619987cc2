#include "cuda/prefill/schedule.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "mxattn/cuda_prefill.h"

namespace mxattn::cuda::prefill {
namespace {

// Rows [16 g, 16 g + 16) of a CTA for the groups g of its query tile u (of `groups` groups each).
uint32_t row_groups_of(int64_t u, int64_t groups) {
  return ((uint32_t(1) << groups) - 1) << (u * groups);
}

// The key tiles a CTA's split walks over with a sparse layout, and which 16-key groups of each the
// listed blocks give each of its query tiles. Blocks are clipped to the query tile's visible range
// [lo(first row), hi(last row)], so no step is spent on keys that no row of the tile sees.
void add_sparse_steps(const core::Problem& p, const std::vector<core::QueryTile>& subs,
                      const std::vector<int64_t>& launched, int64_t split_index, int64_t tile_n,
                      int64_t groups, int cta_groups, uint32_t storing_rows, WorkItem& item,
                      std::vector<SparseTile>& out) {
  const int granules = int(core::ceil_div(tile_n, kSparseGranule));
  const int64_t block_k = p.args.sparse.block_k;
  std::map<int64_t, uint64_t> steps;
  for (size_t u = 0; u < subs.size(); ++u) {
    if (split_index >= launched[u]) continue;
    const core::QueryTile& qt = subs[u];
    const core::TileRun run = core::split_tiles(qt.run, qt.splits, split_index);
    const int64_t lo = qt.vis.lo(qt.row_first), hi = qt.vis.hi(qt.row_last);
    for (int64_t pos = run.begin; pos < run.begin + run.count; ++pos) {
      const int64_t first = std::max(lo, qt.key_tile(pos) * block_k);
      const int64_t last = std::min(hi, (qt.key_tile(pos) + 1) * block_k - 1);
      for (int64_t key = first / kSparseGranule * kSparseGranule; key <= last;
           key += kSparseGranule) {
        const int key_group = int(key % tile_n / kSparseGranule);
        uint64_t& bits = steps[key / tile_n];
        for (int64_t g = int64_t(u) * groups; g < int64_t(u + 1) * groups; ++g)
          bits |= uint64_t(1) << present_bit(int(g), key_group, granules);
      }
    }
  }
  // Rows that store nothing (past Sq, or of a query tile with fewer splits) see every key, so that
  // the mask runs only where a stored row needs it.
  uint64_t idle = 0;
  for (int g = 0; g < cta_groups; ++g) {
    if (!((storing_rows >> g) & 1u))
      idle |= ((uint64_t(1) << granules) - 1) << present_bit(g, 0, granules);
  }
  item.tile_first = int64_t(out.size());
  item.tile_count = int64_t(steps.size());
  for (const auto& [tile, bits] : steps) out.push_back({tile, bits | idle});
}

}  // namespace

Schedule build_schedule(const core::Problem& p, const core::SplitParams& split, int64_t cta_rows,
                        int64_t key_tile, bool user_partials) {
  Schedule sc;
  const int64_t q_tiles = core::query_tiles_per_head(p, split);
  // A CTA holds cta_rows rows: one query tile of the partition, or (sparse, block_q below
  // it) several, each with its own split count.
  const int64_t subs_per_cta = cta_rows / split.tile_m;
  const int64_t groups = split.tile_m / kSparseGranule;
  const int64_t ctas_per_head = core::ceil_div(p.seq_q, cta_rows);
  sc.tile_heads = p.sparse && p.args.sparse.row_ptr.shape[1] > 1 ? p.heads_q : 1;
  sc.tiles.resize(size_t(p.batch * sc.tile_heads * q_tiles));
  std::vector<core::QueryTile> subs;
  std::vector<int64_t> launched;
  for (int64_t b = 0; b < p.batch; ++b) {
    const core::Visibility vis = p.visibility(b);
    for (int64_t h = 0; h < sc.tile_heads; ++h) {
      const size_t entry_begin = sc.work.size();
      for (int64_t cta = 0; cta < ctas_per_head; ++cta) {
        subs.clear();
        launched.clear();
        int64_t cta_splits = 0;
        for (int64_t t = cta * subs_per_cta; t < std::min(q_tiles, (cta + 1) * subs_per_cta); ++t) {
          const core::QueryTile qt = core::query_tile(p, split, b, h, t);
          sc.tiles[size_t((b * sc.tile_heads + h) * q_tiles + t)] = {
              qt.run.begin, qt.run.count, int32_t(qt.splits), int32_t(qt.count)};
          sc.any_combine = sc.any_combine || qt.count >= 2;
          subs.push_back(qt);
          launched.push_back(user_partials && !split.early_exit ? qt.splits
                                                                : std::max<int64_t>(1, qt.count));
          cta_splits = std::max(cta_splits, launched.back());
        }
        for (int64_t s = 0; s < cta_splits; ++s) {
          WorkItem item{.b = int32_t(b),
                        .q_tile = int32_t(cta),
                        .split = int32_t(s),
                        .head = int32_t(h),
                        .last = vis.last,
                        .offset = vis.offset};
          for (size_t u = 0; u < subs.size(); ++u) {
            if (s >= launched[u]) continue;
            const uint32_t rows = row_groups_of(int64_t(u), groups);
            if (s == 0 && subs[u].count <= 1) item.final_rows |= rows;
            if (subs[u].count >= 2 || user_partials) item.partial_rows |= rows;
          }
          if (p.sparse) {
            add_sparse_steps(p, subs, launched, s, key_tile, groups, int(cta_rows / kSparseGranule),
                             item.final_rows | item.partial_rows, item, sc.sparse_tiles);
          } else {
            const core::TileRun run = core::split_tiles(subs[0].run, subs[0].splits, s);
            item.tile_first = run.begin;
            item.tile_count = run.count;
          }
          sc.work.push_back(item);
        }
      }
      // Within a (batch entry, head) the longest splits go first.
      std::stable_sort(
          sc.work.begin() + int64_t(entry_begin), sc.work.end(),
          [](const WorkItem& x, const WorkItem& y) { return x.tile_count > y.tile_count; });
    }
  }
  return sc;
}

}  // namespace mxattn::cuda::prefill
