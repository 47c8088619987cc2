// spec §3's merge of split partials: NaN-safe for empty splits, NaN-propagating for NaN partials.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/combine.h"

namespace mxattn::core {
namespace {

struct Merged {
  float lse;
  float o;
};

// Merges one row of head dim 1: O_s are the split outputs, L_s their LSEs.
Merged merge(const std::vector<float>& lse_s, const std::vector<float>& o_s) {
  std::vector<float> w(lse_s.size());
  const MergeScale st = merge_weights(
      int64_t(lse_s.size()), [&](int64_t s) { return lse_s[size_t(s)]; }, w.data());
  float acc = 0.0f;
  for (size_t s = 0; s < w.size(); ++s) acc += w[s] * o_s[s];
  return {merge_lse(st.m, st.sum), acc / merge_divisor(st.sum)};
}

TEST(Combine, AllEmptySplitsGiveZeroAndMinusInfinity) {
  std::vector<float> w(3, -1.0f);
  const MergeScale st = merge_weights(
      3, [](int64_t) { return -INFINITY; }, w.data());
  EXPECT_EQ(st.sum, 0.0f);
  for (float x : w) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(merge_lse(st.m, st.sum), -INFINITY);
  EXPECT_EQ(merge_divisor(st.sum), 1.0f);
  const Merged m = merge({-INFINITY, -INFINITY, -INFINITY}, {0.0f, 0.0f, 0.0f});
  EXPECT_EQ(m.o, 0.0f);
  EXPECT_FALSE(std::isnan(m.o));
}

TEST(Combine, NoSplitsIsAnEmptyRow) {
  const MergeScale st = merge_weights(
      0, [](int64_t) { return 0.0f; }, nullptr);
  EXPECT_EQ(merge_lse(st.m, st.sum), -INFINITY);
  EXPECT_EQ(merge_divisor(st.sum), 1.0f);
}

TEST(Combine, EmptySplitsWeighNothing) {
  const Merged m =
      merge({-INFINITY, std::log(2.0f), -INFINITY, std::log(3.0f)}, {0.0f, 1.0f, 0.0f, 6.0f});
  EXPECT_NEAR(m.lse, std::log(5.0), 1e-6);
  EXPECT_NEAR(m.o, (2.0 * 1.0 + 3.0 * 6.0) / 5.0, 1e-6);
}

TEST(Combine, LargeLsesDoNotOverflow) {
  const Merged m = merge({200.0f, 200.0f}, {1.0f, 3.0f});
  EXPECT_NEAR(m.lse, 200.0 + std::log(2.0), 1e-4);
  EXPECT_NEAR(m.o, 2.0, 1e-6);
}

TEST(Combine, NanLsePropagates) {
  const Merged m = merge({0.5f, NAN, 1.0f}, {1.0f, 1.0f, 1.0f});
  EXPECT_TRUE(std::isnan(m.lse));
  EXPECT_TRUE(std::isnan(m.o));
  const Merged only_nan = merge({NAN}, {1.0f});
  EXPECT_TRUE(std::isnan(only_nan.lse));
  EXPECT_TRUE(std::isnan(only_nan.o));
}

TEST(Combine, NanOutputPropagates) {
  const Merged m = merge({0.0f, 0.0f}, {NAN, 1.0f});
  EXPECT_FALSE(std::isnan(m.lse));
  EXPECT_TRUE(std::isnan(m.o));
}

}  // namespace
}  // namespace mxattn::core
