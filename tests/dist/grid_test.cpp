// Box copies between byte grids of either orientation, run on the host.
#include "dist/grid.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dist/host_memory.h"

namespace mxattn::dist {
namespace {

// Value of cell (o, s, h), byte u, distinct for every cell and byte.
uint8_t mark(int64_t o, int64_t s, int64_t h, int64_t u) {
  return uint8_t(o * 71 + s * 13 + h * 5 + u + 1);
}

void fill(const Grid& g) {
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t s = 0; s < g.seq; ++s)
      for (int64_t h = 0; h < g.heads; ++h)
        for (int64_t u = 0; u < g.unit; ++u) {
          const int64_t cell =
              g.seq_major ? (o * g.seq + s) * g.heads + h : (o * g.heads + h) * g.seq + s;
          g.data[cell * g.unit + u] = std::byte{mark(o, s, h, u)};
        }
}

TEST(Grid, BoxLandsWhereItShouldInBothOrientations) {
  for (const bool seq_major : {true, false}) {
    SCOPED_TRACE(seq_major ? "seq major" : "heads major");
    std::vector<std::byte> a(2 * 7 * 5 * 3), b(2 * 9 * 4 * 3, std::byte{0});
    const Grid src{a.data(), 2, 7, 5, 3, seq_major};
    const Grid dst{b.data(), 2, 9, 4, 3, seq_major};
    fill(src);
    std::vector<Copy2D> copies;
    // Source rows 2..5, heads 1..3 to target rows 4..7, heads 0..2.
    append_box(&copies, src, {2, 1}, dst, {4, 0}, 4, 3);
    host_copy_2d(copies.data(), int64_t(copies.size()));
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t s = 0; s < 9; ++s)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t u = 0; u < 3; ++u) {
            const int64_t cell = seq_major ? (o * 9 + s) * 4 + h : (o * 4 + h) * 9 + s;
            const bool inside = s >= 4 && s < 8 && h < 3;
            const uint8_t want = inside ? mark(o, s - 2, h + 1, u) : 0;
            ASSERT_EQ(uint8_t(b[size_t(cell * 3 + u)]), want) << o << " " << s << " " << h;
          }
  }
}

TEST(Grid, WholeRowBoxesMergeIntoOneCopy) {
  std::vector<std::byte> a(3 * 4 * 2 * 8), b(3 * 4 * 2 * 8);
  const Grid src{a.data(), 3, 4, 2, 8, true};
  const Grid dst{b.data(), 3, 4, 2, 8, true};
  std::vector<Copy2D> copies;
  append_box(&copies, src, {0, 0}, dst, {0, 0}, 4, 2);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].height * copies[0].width, int64_t(a.size()));
}

// Two tensors that follow on in memory (as adjacent device allocations can) keep one copy each: a
// merged copy would span two allocations, which cudaMemcpy refuses.
TEST(Grid, BoxesOfDifferentTensorsNeverMerge) {
  std::vector<std::byte> a(2 * 2 * 4 * 8), b(2 * 2 * 4 * 8);
  const int64_t half = int64_t(a.size()) / 2;
  const Grid src_k{a.data(), 1, 4, 2, 8, true}, src_v{a.data() + half, 1, 4, 2, 8, true};
  const Grid dst_k{b.data(), 1, 4, 2, 8, true}, dst_v{b.data() + half, 1, 4, 2, 8, true};
  std::vector<Copy2D> copies;
  append_box(&copies, src_k, {0, 0}, dst_k, {0, 0}, 4, 2);
  append_box(&copies, src_v, {0, 0}, dst_v, {0, 0}, 4, 2);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].height * copies[0].width, half);
  EXPECT_EQ(copies[1].src, src_v.data);
}

}  // namespace
}  // namespace mxattn::dist
