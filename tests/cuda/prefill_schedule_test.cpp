// The prefill kernel's schedule, checked on the host against spec §3's partition (no GPU needed):
// for random dense and block-sparse problems, every row of every work item sees, over its key
// steps and their present bits, exactly the keys of its split of the partition (core/plan.h) that
// the reference engine visits; every output row and every partial the plan promises is written by
// exactly one work item; the combine's tile table holds each query tile's partition.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "api/engines.h"
#include "core/plan.h"
#include "core/problem.h"
#include "cpu/test_problem.h"
#include "cuda/prefill/schedule.h"

namespace mxattn::cuda::prefill {
namespace {

constexpr int64_t kCtaRows = 128;

// A random problem of the shapes the prefill engine sees: several CTA query tiles, every sparse
// block size, layouts per batch entry and head or broadcast, masks, splits and partial options.
test::Spec schedule_spec(uint64_t seed) {
  test::SpecRange range;
  range.max_seq_q = 420;
  range.max_seq_k = 700;
  range.max_work = 60'000'000;
  range.mx = false;
  range.paged = false;
  range.strided = false;
  range.k_mean = false;
  test::Spec s = test::random_spec(seed, range);
  test::Rng rng(seed);
  s.seq_q = rng.uniform(1, 420);
  s.seq_k = rng.uniform(1, 700);
  s.batch = rng.uniform(1, 2);
  s.heads_kv = 1;
  s.heads_q = rng.uniform(1, 3);
  s.dim_qk = s.dim_v = 16;
  const int32_t offset = int32_t(rng.uniform(-s.seq_q / 2, s.seq_k));
  if (s.causal == Causal::prefix) s.prefix_offset.assign(size_t(s.batch), offset);
  s.kv_len.clear();
  if (rng.uniform(0, 1) == 1) {
    for (int64_t b = 0; b < s.batch; ++b) s.kv_len.push_back(int32_t(rng.uniform(0, s.seq_k)));
  }
  if (s.window >= 0) s.window = rng.uniform(0, s.seq_k);
  s.block_q = s.block_k = 0;
  if (rng.uniform(0, 2) != 0) {
    const int32_t blocks[] = {16, 32, 64, 128, 256};
    s.block_q = blocks[rng.uniform(0, 4)];
    s.block_k = blocks[rng.uniform(0, 4)];
    s.sparse_density = rng.uniform(0, 4) == 0 ? 1.0 : double(rng.uniform(0, 100)) / 100;
    s.sparse_per_batch = rng.uniform(0, 1) == 1;
    s.sparse_per_head = rng.uniform(0, 1) == 1;
  }
  s.split_kv = int32_t(rng.uniform(0, 4));
  s.tile_m = 0;
  s.tile_n = 0;
  return s;
}

// The keys row i sees in split s of its query tile: what the reference engine visits.
std::vector<int64_t> partition_keys(const core::Problem& p, const core::SplitParams& split,
                                    int64_t b, int64_t h, int64_t i, int64_t s) {
  const core::QueryTile tile = core::query_tile(p, split, b, h, i / split.tile_m);
  const core::TileRun run = core::split_tiles(tile.run, tile.splits, s);
  std::vector<int64_t> keys;
  for (int64_t pos = run.begin; pos < run.begin + run.count; ++pos) {
    const int64_t first = tile.key_tile(pos) * split.tile_n;
    for (int64_t j = first; j < first + split.tile_n; ++j)
      if (tile.vis.visible(i, j)) keys.push_back(j);
  }
  return keys;
}

// The keys row i (tile-local row r) of a work item sees over its key steps.
std::vector<int64_t> scheduled_keys(const core::Problem& p, const Schedule& sc,
                                    const WorkItem& item, int64_t key_tile, int64_t r, int64_t i) {
  const core::Visibility vis = p.visibility(item.b);
  const int granules = int(core::ceil_div(key_tile, kSparseGranule));
  std::vector<int64_t> keys;
  int64_t previous_tile = -1;
  for (int64_t k = 0; k < item.tile_count; ++k) {
    int64_t tile = item.tile_first + k;
    uint64_t present = ~uint64_t(0);
    if (p.sparse) {
      const SparseTile& step = sc.sparse_tiles[size_t(item.tile_first + k)];
      tile = step.key_tile;
      present = step.present;
    }
    EXPECT_GT(tile, previous_tile) << "key steps run in increasing key tile";
    EXPECT_LT(tile * key_tile, p.seq_k) << "a key step starts inside the keys";
    previous_tile = tile;
    for (int64_t j = tile * key_tile; j < (tile + 1) * key_tile; ++j) {
      const int bit = present_bit(int(r / kSparseGranule),
                                  int((j - tile * key_tile) / kSparseGranule), granules);
      if (vis.visible(i, j) && ((present >> bit) & 1u)) keys.push_back(j);
    }
  }
  return keys;
}

void check_schedule(const test::Spec& spec, int64_t key_tile, bool user_partials) {
  SCOPED_TRACE(spec.describe());
  SCOPED_TRACE(testing::Message() << "key_tile " << key_tile << " user_partials " << user_partials);
  test::TestProblem problem(spec);
  core::Problem p;
  ASSERT_TRUE(core::validate_problem(problem.args(), &p).is_ok());
  const core::SplitParams split = core::resolve_split(p, kCtaRows, key_tile);
  const Schedule sc = build_schedule(p, split, kCtaRows, key_tile, user_partials);
  const int64_t q_tiles = core::query_tiles_per_head(p, split);
  const bool per_head = p.sparse && p.args.sparse.row_ptr.shape[1] > 1;
  ASSERT_EQ(sc.tile_heads, per_head ? p.heads_q : 1);

  std::map<std::tuple<int64_t, int64_t, int64_t>, int> finals;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, int> partials;
  for (const WorkItem& item : sc.work) {
    const std::vector<int64_t> heads = [&] {
      std::vector<int64_t> hs;
      for (int64_t h = 0; h < (per_head ? 1 : p.heads_q); ++h) hs.push_back(item.head + h);
      return hs;
    }();
    for (const int64_t h : heads) {
      for (int64_t r = 0; r < kCtaRows; ++r) {
        const int64_t i = int64_t(item.q_tile) * kCtaRows + r;
        if (i >= p.seq_q) break;
        const bool final_out = (item.final_rows >> (r / kSparseGranule)) & 1u;
        const bool partial_out = (item.partial_rows >> (r / kSparseGranule)) & 1u;
        if (!final_out && !partial_out) continue;
        if (final_out) ++finals[{item.b, h, i}];
        if (partial_out) ++partials[{item.b, h, i, item.split}];
        ASSERT_EQ(scheduled_keys(p, sc, item, key_tile, r, i),
                  partition_keys(p, split, item.b, h, i, item.split))
            << "b " << item.b << " h " << h << " row " << i << " split " << item.split;
      }
    }
  }

  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const core::QueryTile tile = core::query_tile(p, split, b, h, i / split.tile_m);
        const TileInfo& info =
            sc.tiles[size_t((b * sc.tile_heads + (per_head ? h : 0)) * q_tiles + i / split.tile_m)];
        ASSERT_EQ(info.count, tile.count);
        ASSERT_EQ(info.splits, tile.splits);
        ASSERT_EQ((finals[{b, h, i}]), tile.count <= 1 ? 1 : 0)
            << "b " << b << " h " << h << " row " << i;
        const bool writes_partials = tile.count >= 2 || user_partials;
        const int64_t written =
            user_partials && !split.early_exit ? tile.splits : std::max<int64_t>(1, tile.count);
        for (int64_t s = 0; s < tile.splits; ++s) {
          const int want = writes_partials && s < written ? 1 : 0;
          ASSERT_EQ((partials[{b, h, i, s}]), want)
              << "b " << b << " h " << h << " row " << i << " split " << s;
        }
      }
}

TEST(PrefillSchedule, RowsSeeExactlyTheirSplitOfThePartition) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const test::Spec spec = schedule_spec(seed);
    for (const int64_t key_tile : {128, 80}) check_schedule(spec, key_tile, seed % 2 == 0);
  }
}

// The engine's auto split target is 4096 keys' worth of the partition's key tiles, so a run of
// 4096 keys is one split whatever the key tile (32 tiles of 128 keys at Dqk 128, 52 of 80 at Dqk
// 256), the sparse block is the key tile with a layout, and the user's auto_target wins.
TEST(PrefillSchedule, AutoSplitTargetIs4096KeysOfTiles) {
  const auto split_of = [](const test::Spec& spec) {
    test::TestProblem problem(spec);
    core::Problem p;
    EXPECT_TRUE(core::validate_problem(problem.args(), &p).is_ok());
    return std::pair(
        api::split_params(p, api::EngineKind::cuda_prefill),
        core::query_tile(p, api::split_params(p, api::EngineKind::cuda_prefill), 0, 0, 0).splits);
  };
  test::Spec s;
  s.seq_q = 256;
  s.seq_k = 4096;
  s.split_kv = 0;
  s.heads_q = s.heads_kv = 1;
  for (const int64_t dim : {128, 256}) {
    s.dim_qk = s.dim_v = dim;
    const auto [split, splits] = split_of(s);
    const int64_t tile_n = dim == 256 ? 80 : 128;
    EXPECT_EQ(split.tile_n, tile_n);
    EXPECT_EQ(split.tile_m, kCtaRows);
    EXPECT_EQ(split.target_tiles_per_split, (4096 + tile_n - 1) / tile_n);
    EXPECT_EQ(splits, 1) << "Dqk " << dim;
  }
  s.dim_qk = s.dim_v = 128;
  test::Spec longer = s;
  longer.seq_k = 4097;
  EXPECT_EQ(split_of(longer).second, 2);

  test::Spec sparse = s;
  sparse.block_q = 128;
  sparse.block_k = 64;
  sparse.sparse_density = 1.0;
  EXPECT_EQ(split_of(sparse).first.tile_n, 64);
  EXPECT_EQ(split_of(sparse).first.target_tiles_per_split, 64);

  test::Spec given = s;
  given.auto_target = 5;
  EXPECT_EQ(split_of(given).first.target_tiles_per_split, 5);
}

}  // namespace
}  // namespace mxattn::cuda::prefill
