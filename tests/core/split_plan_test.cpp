// spec §2 visibility and spec §3 split partition and counts, against brute force written from the
// spec.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/split_plan.h"
#include "core/visibility.h"

namespace mxattn::core {
namespace {

enum class Alignment { none, top_left, bottom_right, prefix };

// spec §2, rules 1-3, for one batch entry, written out independently of visibility.h.
bool spec_visible(int64_t i, int64_t j, int64_t kv_len, int64_t seq_q, Alignment align,
                  int64_t prefix_offset, int64_t window) {
  const int64_t last = kv_len - 1;
  if (j > last) return false;
  const bool causal = align != Alignment::none;
  const int64_t off = align == Alignment::bottom_right ? kv_len - seq_q
                      : align == Alignment::prefix     ? prefix_offset
                                                       : 0;
  if (causal && j > i + off) return false;
  if (window >= 0) {
    const int64_t hi = causal ? i + off : last;
    if (j < hi - window) return false;
  }
  return j >= 0;
}

Visibility visibility_for(int64_t kv_len, int64_t seq_q, Alignment align, int64_t prefix_offset,
                          int64_t window) {
  Visibility v;
  v.last = kv_len - 1;
  v.causal = align != Alignment::none;
  v.offset = align == Alignment::bottom_right ? kv_len - seq_q
             : align == Alignment::prefix     ? prefix_offset
                                              : 0;
  v.window = window;
  return v;
}

TEST(Visibility, MatchesTheSpecRuleExhaustively) {
  for (Alignment align :
       {Alignment::none, Alignment::top_left, Alignment::bottom_right, Alignment::prefix}) {
    for (int64_t seq_q : {1, 5, 9}) {
      for (int64_t kv_len = 0; kv_len <= 9; ++kv_len) {
        for (int64_t prefix : {-12, -3, 0, 2, 7, 15}) {
          for (int64_t window : {-1, 0, 1, 3, 20}) {
            SCOPED_TRACE(testing::Message()
                         << "align " << int(align) << " Sq " << seq_q << " kv_len " << kv_len
                         << " prefix " << prefix << " window " << window);
            const Visibility v = visibility_for(kv_len, seq_q, align, prefix, window);
            for (int64_t i = 0; i < seq_q; ++i) {
              bool any = false;
              for (int64_t j = -2; j < 12; ++j) {
                const bool want = spec_visible(i, j, kv_len, seq_q, align, prefix, window);
                ASSERT_EQ(v.visible(i, j), want) << "row " << i << " key " << j;
                any |= want;
              }
              ASSERT_EQ(v.row_empty(i), !any) << "row " << i;
            }
          }
        }
      }
    }
  }
}

TEST(Visibility, BoundsNeverDecreaseWithTheRow) {
  for (int64_t offset : {-5, 0, 4}) {
    for (int64_t window : {-1, 0, 2}) {
      Visibility v;
      v.last = 6;
      v.causal = true;
      v.offset = offset;
      v.window = window;
      for (int64_t i = 0; i + 1 < 16; ++i) {
        EXPECT_LE(v.hi(i), v.hi(i + 1));
        EXPECT_LE(v.lo(i), v.lo(i + 1));
      }
    }
  }
}

// spec §3 pinned values (rocMLIR's tests).
TEST(SplitCounts, PinnedPrefixCausal) {
  Visibility v;
  v.last = 127;
  v.causal = true;
  v.offset = 62;
  std::vector<int64_t> counts;
  for (int64_t i = 0; i < 4; ++i) counts.push_back(conservative_split_count(v, i, 32, 4));
  EXPECT_EQ(counts, (std::vector<int64_t>{2, 2, 3, 3}));
}

TEST(SplitCounts, PinnedTopLeftCausal) {
  const Visibility v = visibility_for(96, 96, Alignment::top_left, 0, -1);
  for (int64_t i = 0; i < 96; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(conservative_split_count(v, i, 32, 2), i < 32 ? 1 : 2);
  }
}

// For one row without a window the conservative count is the exact count (nested ceilings agree);
// a causal row with no key still gets 1 there, which is why it is valid only when every split ran.
TEST(SplitCounts, ConservativeMatchesExactForSingleRows) {
  for (int64_t kv_len = 0; kv_len <= 70; ++kv_len) {
    for (int64_t offset : {-3, 0, 9}) {
      for (int64_t tile_n : {1, 4, 16}) {
        for (int64_t split_kv = 1; split_kv <= 6; ++split_kv) {
          Visibility v = visibility_for(kv_len, 8, Alignment::prefix, offset, -1);
          for (int64_t i = 0; i < 8; ++i) {
            SCOPED_TRACE(testing::Message()
                         << "kv_len " << kv_len << " offset " << offset << " tile_n " << tile_n
                         << " split_kv " << split_kv << " row " << i);
            const int64_t exact =
                valid_split_count(dense_key_tiles(v, i, i, tile_n).count, split_kv);
            const int64_t conservative = conservative_split_count(v, i, tile_n, split_kv);
            if (kv_len > 0 && i + offset >= 0) {
              EXPECT_EQ(conservative, exact);
            } else {
              EXPECT_GE(conservative, exact);
            }
          }
        }
      }
    }
  }
}

TEST(SplitPartition, CoversEveryTileOnceInOrder) {
  for (int64_t begin : {0, 3}) {
    for (int64_t n = 0; n <= 40; ++n) {
      for (int64_t split_kv = 1; split_kv <= 12; ++split_kv) {
        SCOPED_TRACE(testing::Message()
                     << "begin " << begin << " n " << n << " split_kv " << split_kv);
        const TileRun run{begin, n};
        int64_t next = begin;
        int64_t non_empty = 0;
        bool seen_empty = false;
        for (int64_t s = 0; s < split_kv; ++s) {
          const TileRun part = split_tiles(run, split_kv, s);
          ASSERT_GE(part.count, 0);
          if (part.count == 0) {
            seen_empty = true;
            continue;
          }
          ASSERT_FALSE(seen_empty) << "split " << s << " holds tiles after an empty split";
          ASSERT_EQ(part.begin, next) << "split " << s;
          ASSERT_LE(part.count, split_iters(n, split_kv));
          next += part.count;
          ++non_empty;
        }
        EXPECT_EQ(next, begin + n);
        EXPECT_EQ(valid_split_count(n, split_kv), non_empty);
      }
    }
  }
}

// The tiles of consecutive splits taken together (a decode CTA's chain) are the union of each
// split's tiles, and empty at the run's end exactly when every one of them is empty.
TEST(SplitPartition, ConsecutiveSplitsAreTheUnionOfTheirTiles) {
  for (int64_t n = 0; n <= 40; ++n) {
    for (int64_t split_kv = 1; split_kv <= 12; ++split_kv) {
      const TileRun run{5, n};
      const int64_t iters = split_iters(n, split_kv);
      for (int64_t s = 0; s < split_kv; ++s) {
        for (int64_t k = 1; s + k <= split_kv; ++k) {
          SCOPED_TRACE(testing::Message() << "n " << n << " split_kv " << split_kv << " splits ["
                                          << s << ", " << s + k << ")");
          const TileRun group = consecutive_split_tiles(run, iters, s, k);
          const TileRun first = split_tiles(run, split_kv, s);
          int64_t count = 0;
          for (int64_t j = s; j < s + k; ++j) count += split_tiles(run, split_kv, j).count;
          EXPECT_EQ(group.count, count);
          EXPECT_EQ(group.begin, first.begin);
        }
      }
    }
  }
}

TEST(SplitPartition, AutoSplitDependsOnTheTileAlone) {
  EXPECT_EQ(auto_split_kv(0, 8, 64), 1);
  EXPECT_EQ(auto_split_kv(8, 8, 64), 1);
  EXPECT_EQ(auto_split_kv(9, 8, 64), 2);
  EXPECT_EQ(auto_split_kv(10000, 8, 64), 64);
  SplitParams params;
  params.split_kv = 0;
  EXPECT_EQ(params.splits_for(17),
            auto_split_kv(17, params.target_tiles_per_split, params.max_splits));
  params.split_kv = 3;
  EXPECT_EQ(params.splits_for(17), 3);
}

// Dense key tiles of a query tile: every key a row of the tile sees lies in the run, and when its
// first and last rows see keys the run starts and ends at their tiles.
TEST(KeyTiles, DenseRunCoversExactlyTheVisibleKeys) {
  for (Alignment align :
       {Alignment::none, Alignment::top_left, Alignment::bottom_right, Alignment::prefix}) {
    for (int64_t kv_len : {0, 1, 13, 40}) {
      for (int64_t window : {-1, 0, 5, 17}) {
        for (int64_t tile_n : {1, 4, 16}) {
          const int64_t seq_q = 24;
          const Visibility v = visibility_for(kv_len, seq_q, align, 6, window);
          for (int64_t first = 0; first < seq_q; first += 5) {
            for (int64_t last = first; last < seq_q; last += 3) {
              SCOPED_TRACE(testing::Message()
                           << "align " << int(align) << " kv_len " << kv_len << " window " << window
                           << " tile_n " << tile_n << " rows " << first << ".." << last);
              const TileRun run = dense_key_tiles(v, first, last, tile_n);
              for (int64_t i = first; i <= last; ++i) {
                for (int64_t j = 0; j < kv_len; ++j) {
                  if (!spec_visible(i, j, kv_len, seq_q, align, 6, window)) continue;
                  ASSERT_GE(j / tile_n, run.begin);
                  ASSERT_LT(j / tile_n, run.begin + run.count);
                }
              }
              if (!v.row_empty(first) && !v.row_empty(last)) {
                ASSERT_GT(run.count, 0);
                EXPECT_EQ(run.begin, v.lo(first) / tile_n);
                EXPECT_EQ(run.begin + run.count - 1, v.hi(last) / tile_n);
              }
            }
          }
        }
      }
    }
  }
}

// Sparse key tiles: exactly the listed blocks that intersect [lo(first row), hi(last row)].
TEST(KeyTiles, SparseRunIsTheListedBlocksInRange) {
  const uint32_t seed = 20240611;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t block_k = int64_t(16) << (rng() % 3);
    const int64_t k_blocks = 1 + rng() % 10;
    std::vector<int32_t> cols;
    for (int32_t c = 0; c < k_blocks; ++c) {
      if (rng() % 2) cols.push_back(c);
    }
    Visibility v;
    v.last = int64_t(rng() % (k_blocks * block_k + 1)) - 1;
    v.causal = rng() % 2;
    v.offset = int64_t(rng() % 200) - 60;
    v.window = rng() % 3 ? -1 : int64_t(rng() % 100);
    const int64_t first = rng() % 64;
    const int64_t last = first + rng() % 64;
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    const TileRun run =
        sparse_key_tiles(v, first, last, cols.data(), int64_t(cols.size()), block_k);
    std::vector<int64_t> want;
    const int64_t lo = v.lo(first), hi = v.hi(last);
    for (int64_t p = 0; p < int64_t(cols.size()); ++p) {
      const int64_t block_first = cols[p] * block_k, block_last = block_first + block_k - 1;
      if (hi >= lo && block_last >= lo && block_first <= hi) want.push_back(p);
    }
    ASSERT_EQ(run.count, int64_t(want.size()));
    for (int64_t k = 0; k < run.count; ++k) ASSERT_EQ(run.begin + k, want[k]);
  }
}

}  // namespace
}  // namespace mxattn::core
