// The layout rules of sequence parallelism (spec §8), by brute force over head counts and shards.
#include "dist/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "mxattn/mx.h"

namespace mxattn::dist {
namespace {

// Every local query head reads, through the local GQA grouping, the KV head its global head reads;
// the KV heads it receives are exactly the distinct ones it reads.
TEST(HeadSlice, LocalGroupingReadsTheGlobalKvHead) {
  for (int64_t ranks = 1; ranks <= 8; ++ranks) {
    for (int64_t heads_kv = 1; heads_kv <= 24; ++heads_kv) {
      for (int64_t group = 1; group <= 8; ++group) {
        const int64_t heads_q = heads_kv * group;
        if (heads_q % ranks != 0) continue;
        for (int64_t rank = 0; rank < ranks; ++rank) {
          SCOPED_TRACE(::testing::Message() << "Hq=" << heads_q << " Hkv=" << heads_kv
                                            << " P=" << ranks << " rank=" << rank);
          const HeadSlice s = head_slice(heads_q, heads_kv, ranks, rank);
          ASSERT_EQ(s.q_count * ranks, heads_q);
          ASSERT_EQ(s.q_count % s.kv_group, 0);
          std::set<int64_t> read;
          for (int64_t i = 0; i < s.q_count; ++i) {
            const int64_t global_kv = (s.q_first + i) / group;
            ASSERT_EQ(s.kv_of_local(i / s.kv_group), global_kv) << "local query head " << i;
            read.insert(global_kv);
          }
          EXPECT_EQ(int64_t(read.size()), s.kv_distinct);
          EXPECT_EQ(*read.begin(), s.kv_first);
          if (heads_kv % ranks == 0) {
            // The plain split: Hkv/P KV heads each, none repeated.
            EXPECT_EQ(s.kv_count, heads_kv / ranks);
            EXPECT_EQ(s.kv_first, rank * heads_kv / ranks);
            EXPECT_EQ(s.kv_distinct, s.kv_count);
          }
        }
      }
    }
  }
}

TEST(HeadSlice, RunsSpreadReceivedHeadsOverLocalOnes) {
  // Hq=12, Hkv=4 (group 3) over 3 ranks: 4 query heads each, local group gcd(4, 3) = 1.
  const HeadSlice s = head_slice(12, 4, 3, 0);
  EXPECT_EQ(s.kv_count, 4);
  EXPECT_EQ(s.kv_first, 0);
  EXPECT_EQ(s.kv_distinct, 2);
  const std::vector<HeadRun> runs = kv_head_runs(s);
  // Local KV heads read global 0, 0, 0, 1.
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].local_first, 0);
  EXPECT_EQ(runs[0].received_first, 0);
  EXPECT_EQ(runs[0].count, 1);
  EXPECT_EQ(runs[2].local_first, 2);
  EXPECT_EQ(runs[2].received_first, 0);
  EXPECT_EQ(runs[2].count, 2);
  for (int64_t ranks : {1, 2, 4}) {
    const HeadSlice split = head_slice(32, 8, ranks, ranks - 1);
    const std::vector<HeadRun> one = kv_head_runs(split);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].count, 8 / ranks);
  }
}

TEST(KeyBlocks, EveryBlockIsCarriedOnceAndStraddledBlocksAreShared) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int ranks = 1 + int(rng() % 6);
    std::vector<int64_t> lengths;
    for (int r = 0; r < ranks; ++r) lengths.push_back(int64_t(rng() % 80));
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    const std::vector<Shard> shards = contiguous_shards(lengths);
    const int64_t total = shards.back().end();
    std::vector<int> owner(static_cast<size_t>(total));
    for (int r = 0; r < ranks; ++r) {
      for (int64_t j = shards[size_t(r)].offset; j < shards[size_t(r)].end(); ++j)
        owner[size_t(j)] = r;
    }
    const int64_t blocks = (total + kMxBlock - 1) / kMxBlock;
    int64_t next = 0;
    for (const Shard& s : shards) {
      const Shard carried = carried_key_blocks(s);
      EXPECT_EQ(carried.offset, next);
      next = carried.end();
      for (int64_t b = carried.offset; b < carried.end(); ++b) {
        EXPECT_TRUE(b * kMxBlock >= s.offset && b * kMxBlock < s.end()) << "block " << b;
      }
    }
    EXPECT_EQ(next, blocks);
    const std::vector<int64_t> straddled = straddled_key_blocks(shards);
    for (int64_t b = 0; b < blocks; ++b) {
      std::set<int> owners;
      for (int64_t j = b * kMxBlock; j < std::min(total, (b + 1) * kMxBlock); ++j) {
        owners.insert(owner[size_t(j)]);
      }
      const bool listed = std::count(straddled.begin(), straddled.end(), b) == 1;
      EXPECT_EQ(listed, owners.size() > 1) << "block " << b;
    }
  }
}

}  // namespace
}  // namespace mxattn::dist
