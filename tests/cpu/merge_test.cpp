// merge_states (spec §3's combine of two states): the bits of mxattn::combine over the two states
// as two splits; empty states; in place; bad arguments named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/combine.h"

namespace mxattn::test {
namespace {

using base::HostTensor;

// Two states [N, H, D] with their LSE [N, H]: random values, some rows empty (-inf) in one or
// both states.
struct States {
  States(int64_t rows, int64_t heads, int64_t dim, DType type, uint64_t seed)
      : o_a(type, {rows, heads, dim}),
        o_b(type, {rows, heads, dim}),
        lse_a(DType::f32, {rows, heads}),
        lse_b(DType::f32, {rows, heads}) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int64_t e = 0; e < o_a.numel(); ++e) {
      base::store_float(o_a.view(), e, normal(rng));
      base::store_float(o_b.view(), e, normal(rng));
    }
    for (int64_t r = 0; r < rows * heads; ++r) {
      lse_a.data<float>()[r] = r % 7 == 0 ? -INFINITY : normal(rng);
      lse_b.data<float>()[r] = r % 5 == 0 ? -INFINITY : normal(rng);
    }
  }
  HostTensor o_a, o_b, lse_a, lse_b;
};

TEST(MergeStates, EqualsCombiningTheTwoStatesAsSplits) {
  for (const DType type : {DType::f32, DType::f16, DType::bf16}) {
    const int64_t rows = 37, heads = 3, dim = 48;
    States s(rows, heads, dim, type, 7);
    HostTensor o(DType::f32, {rows, heads, dim}), lse(DType::f32, {rows, heads});
    MergeArgs m{s.o_a.view(), s.lse_a.view(), s.o_b.view(), s.lse_b.view(), o.view(), lse.view()};
    ASSERT_TRUE(merge_states(m).is_ok());

    // The same states as partials [2, 1, N, H, D] and [2, 1, H, N], every count 2.
    HostTensor po(type, {2, 1, rows, heads, dim}), pl(DType::f32, {2, 1, heads, rows});
    HostTensor counts(DType::i32, {1, heads, rows}), want(DType::f32, {1, rows, heads, dim});
    HostTensor want_lse(DType::f32, {1, heads, rows});
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < dim; ++d) {
          const int64_t e = (r * heads + h) * dim + d;
          base::store_float(po.view(), e, base::load_float(s.o_a.view(), e));
          base::store_float(po.view(), rows * heads * dim + e, base::load_float(s.o_b.view(), e));
        }
        pl.data<float>()[h * rows + r] = s.lse_a.data<float>()[r * heads + h];
        pl.data<float>()[heads * rows + h * rows + r] = s.lse_b.data<float>()[r * heads + h];
        counts.data<int32_t>()[h * rows + r] = 2;
      }
    }
    CombineArgs c{po.view(), pl.view(), counts.view(), want.view(), want_lse.view()};
    ASSERT_TRUE(combine(c).is_ok());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        ASSERT_EQ(lse.data<float>()[r * heads + h], want_lse.data<float>()[h * rows + r]);
        for (int64_t d = 0; d < dim; ++d) {
          const int64_t e = (r * heads + h) * dim + d;
          ASSERT_EQ(o.data<float>()[e], want.data<float>()[e]) << name_of(type) << " " << e;
        }
      }
    }
  }
}

// Two empty states make an empty state: O 0 and LSE -inf, never NaN; a state merged with an empty
// one is itself.
TEST(MergeStates, EmptyStates) {
  States s(4, 1, 32, DType::f32, 3);
  for (int r = 0; r < 4; ++r) s.lse_b.data<float>()[r] = -INFINITY;
  s.lse_a.data<float>()[0] = -INFINITY;
  HostTensor o(DType::f32, {4, 1, 32}), lse(DType::f32, {4, 1});
  ASSERT_TRUE(merge_states({s.o_a.view(), s.lse_a.view(), s.o_b.view(), s.lse_b.view(), o.view(),
                            lse.view()})
                  .is_ok());
  EXPECT_EQ(lse.data<float>()[0], -INFINITY);
  for (int d = 0; d < 32; ++d) EXPECT_EQ(o.data<float>()[d], 0.0f);
  for (int r = 1; r < 4; ++r) {
    EXPECT_FLOAT_EQ(lse.data<float>()[r], s.lse_a.data<float>()[r]);
    for (int d = 0; d < 32; ++d)
      EXPECT_FLOAT_EQ(o.data<float>()[r * 32 + d], s.o_a.data<float>()[r * 32 + d]);
  }
}

// In place: the merged state may overwrite the first.
TEST(MergeStates, InPlace) {
  States s(9, 2, 64, DType::f32, 11), copy(9, 2, 64, DType::f32, 11);
  HostTensor o(DType::f32, {9, 2, 64}), lse(DType::f32, {9, 2});
  ASSERT_TRUE(merge_states({copy.o_a.view(), copy.lse_a.view(), copy.o_b.view(), copy.lse_b.view(),
                            o.view(), lse.view()})
                  .is_ok());
  ASSERT_TRUE(merge_states({s.o_a.view(), s.lse_a.view(), s.o_b.view(), s.lse_b.view(),
                            s.o_a.view(), s.lse_a.view()})
                  .is_ok());
  for (int64_t e = 0; e < o.numel(); ++e) ASSERT_EQ(s.o_a.data<float>()[e], o.data<float>()[e]);
  for (int64_t e = 0; e < lse.numel(); ++e)
    ASSERT_EQ(s.lse_a.data<float>()[e], lse.data<float>()[e]);
}

TEST(MergeStates, BadArgumentsAreNamed) {
  States s(4, 2, 32, DType::f32, 5);
  HostTensor o(DType::f32, {4, 2, 16}), lse(DType::f32, {4, 2});
  const Status st = merge_states(
      {s.o_a.view(), s.lse_a.view(), s.o_b.view(), s.lse_b.view(), o.view(), lse.view()});
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.message().find("o must have shape [N, H, D] = [4, 2, 32], found [4, 2, 16]"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace mxattn::test
