// spec §3's combine through mxattn::combine, and the pinned split counts (rocMLIR's tests) through
// the count functions and a real problem's counts output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "base/host_tensor.h"
#include "core/split_plan.h"
#include "cpu/compare.h"
#include "cpu/test_problem.h"
#include "mxattn/combine.h"

namespace mxattn::test {
namespace {

// Partials [S, 1, Sq, 1, Dv] and their counts, with O and LSE outputs poisoned.
struct CombineCase {
  CombineCase(int64_t slots, int64_t rows, int64_t dim, DType partial_type, DType out_type)
      : partial_o(partial_type, {slots, 1, rows, 1, dim}),
        partial_lse(DType::f32, {slots, 1, 1, rows}),
        counts(DType::i32, {1, 1, rows}),
        o(out_type, {1, rows, 1, dim}),
        lse(DType::f32, {1, 1, rows}) {
    for (int64_t e = 0; e < o.numel(); ++e) base::store_float(o.view(), e, NAN);
    for (int64_t e = 0; e < lse.numel(); ++e) lse.data<float>()[e] = NAN;
  }
  CombineArgs args() const {
    CombineArgs a;
    a.partial_o = partial_o.view();
    a.partial_lse = partial_lse.view();
    a.counts = counts.view();
    a.o = o.view();
    a.lse = lse.view();
    return a;
  }
  base::HostTensor partial_o, partial_lse, counts, o, lse;
};

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};

TEST(Combine, AllMinusInfPartialsGiveZeroAndMinusInf) {
  for (DType partial_type : kFloatTypes) {
    for (DType out_type : kFloatTypes) {
      SCOPED_TRACE(std::string(name_of(partial_type)) + " -> " + std::string(name_of(out_type)));
      CombineCase c(3, 4, 8, partial_type, out_type);
      for (int64_t e = 0; e < c.partial_o.numel(); ++e)
        base::store_float(c.partial_o.view(), e, 0.0f);
      for (int64_t e = 0; e < c.partial_lse.numel(); ++e)
        c.partial_lse.data<float>()[e] = -INFINITY;
      const int32_t counts[] = {3, 1, 0, 2};
      std::copy(std::begin(counts), std::end(counts), c.counts.data<int32_t>());
      const Status st = combine(c.args());
      ASSERT_TRUE(st.is_ok()) << st.message();
      for (int64_t e = 0; e < c.o.numel(); ++e) ASSERT_EQ(base::load_float(c.o.view(), e), 0.0f);
      for (int64_t r = 0; r < 4; ++r) ASSERT_EQ(c.lse.data<float>()[r], -INFINITY);
    }
  }
}

// Splits at or past a row's count hold NaN; the merge never reads them. Row r has count r.
TEST(Combine, ReadsOnlySplitsBelowTheCount) {
  constexpr int64_t kSlots = 3, kRows = 4, kDim = 2;
  CombineCase c(kSlots, kRows, kDim, DType::f32, DType::f32);
  const float lse_of[kSlots] = {0.5f, -1.0f, 2.0f};
  for (int64_t s = 0; s < kSlots; ++s)
    for (int64_t r = 0; r < kRows; ++r) {
      const bool written = s < r;
      c.partial_lse.data<float>()[s * kRows + r] = written ? lse_of[s] : NAN;
      for (int64_t d = 0; d < kDim; ++d)
        c.partial_o.data<float>()[(s * kRows + r) * kDim + d] = written ? float(s + 1 + d) : NAN;
    }
  for (int64_t r = 0; r < kRows; ++r) c.counts.data<int32_t>()[r] = int32_t(r);
  ASSERT_TRUE(combine(c.args()).is_ok());
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0, m = -INFINITY;
    for (int64_t s = 0; s < r; ++s) m = std::fmax(m, lse_of[s]);
    for (int64_t s = 0; s < r; ++s) sum += std::exp(lse_of[s] - m);
    for (int64_t d = 0; d < kDim; ++d) {
      double want = 0;
      for (int64_t s = 0; s < r; ++s) want += std::exp(lse_of[s] - m) * double(s + 1 + d);
      want = r == 0 ? 0.0 : want / sum;
      EXPECT_NEAR(c.o.data<float>()[r * kDim + d], want, 1e-6) << "row " << r;
    }
    if (r == 0) {
      EXPECT_EQ(c.lse.data<float>()[r], -INFINITY);
    } else {
      EXPECT_NEAR(c.lse.data<float>()[r], m + std::log(sum), 1e-6);
    }
  }
}

// One split with a finite L_s has weight exactly 1: its O_s and L_s come back unchanged.
TEST(Combine, OneSplitComesBackBitForBit) {
  CombineCase c(1, 1, 4, DType::f32, DType::f32);
  const float values[] = {0.1f, -3.5f, 7.25f, 1e-3f};
  std::copy(std::begin(values), std::end(values), c.partial_o.data<float>());
  c.partial_lse.data<float>()[0] = 12.375f;
  c.counts.data<int32_t>()[0] = 1;
  ASSERT_TRUE(combine(c.args()).is_ok());
  for (int64_t d = 0; d < 4; ++d) EXPECT_EQ(c.o.data<float>()[d], values[d]);
  EXPECT_EQ(c.lse.data<float>()[0], 12.375f);
}

// rocMLIR's pinned conservative counts (spec §3).
TEST(SplitCounts, PinnedConservativeCounts) {
  core::Visibility prefix;
  prefix.last = 127;
  prefix.causal = true;
  prefix.offset = 62;
  const int64_t prefix_counts[] = {2, 2, 3, 3};
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(core::conservative_split_count(prefix, i, 32, 4), prefix_counts[i]) << "row " << i;
  }
  core::Visibility top_left;
  top_left.last = 95;
  top_left.causal = true;
  for (int64_t i = 0; i < 96; ++i) {
    EXPECT_EQ(core::conservative_split_count(top_left, i, 32, 2), i < 32 ? 1 : 2) << "row " << i;
  }
}

// The same pinned values from a real problem's exact counts: with one row per query tile (prefix
// case) or tiles aligned to the key tiles (top-left case) the exact count of a row's tile is the
// conservative count of the row.
TEST(SplitCounts, PinnedCountsThroughARealProblem) {
  for (Engine engine : {Engine::cpu_reference, Engine::cpu_fast}) {
    Spec prefix;
    prefix.seq_q = 4;
    prefix.seq_k = 128;
    prefix.causal = Causal::prefix;
    prefix.prefix_offset = {62};
    prefix.split_kv = 4;
    prefix.tile_m = 1;
    prefix.tile_n = 32;
    prefix.counts = true;
    TestProblem p(prefix);
    ASSERT_TRUE(p.run(engine).is_ok());
    EXPECT_EQ(p.outputs().counts, (std::vector<int32_t>{2, 2, 3, 3}));

    Spec top_left;
    top_left.seq_q = 96;
    top_left.seq_k = 96;
    top_left.causal = Causal::top_left;
    top_left.split_kv = 2;
    top_left.tile_m = 32;
    top_left.tile_n = 32;
    top_left.counts = true;
    TestProblem t(top_left);
    ASSERT_TRUE(t.run(engine).is_ok());
    const std::vector<int32_t> counts = t.outputs().counts;
    for (int64_t i = 0; i < 96; ++i) EXPECT_EQ(counts[size_t(i)], i < 32 ? 1 : 2) << "row " << i;
  }
}

// When every split was written, the conservative counts (possibly past the exact ones) combine to
// the same result: the extra splits are empty, with weight exactly 0.
TEST(SplitCounts, ConservativeCountsCombineToTheSameResult) {
  for (Engine engine : {Engine::cpu_reference, Engine::cpu_fast}) {
    for (uint64_t seed = 9001; seed <= 9010; ++seed) {
      SpecRange range;
      range.sparse = false;
      range.split = false;
      range.max_work = 500'000;
      Spec spec = random_spec(seed, range);
      if (spec.causal == Causal::none) spec.causal = Causal::top_left;
      spec.window = -1;
      spec.split_kv = int32_t(2 + seed % 4);
      spec.tile_m = 16;
      spec.tile_n = 8;
      spec.partials = true;
      spec.lse = true;
      spec.k_mean = false;
      SCOPED_TRACE(spec.describe());
      TestProblem p(spec);
      ASSERT_TRUE(p.run(engine).is_ok());
      const Outputs want = p.outputs();

      base::HostTensor counts(DType::i32, {spec.batch, spec.heads_q, spec.seq_q});
      for (int64_t b = 0; b < spec.batch; ++b) {
        core::Visibility vis;
        vis.last = spec.kv_len_of(b) - 1;
        vis.causal = true;
        vis.offset = spec.causal == Causal::bottom_right ? spec.kv_len_of(b) - spec.seq_q
                     : spec.causal == Causal::prefix     ? spec.prefix_offset[size_t(b)]
                                                         : 0;
        for (int64_t h = 0; h < spec.heads_q; ++h)
          for (int64_t i = 0; i < spec.seq_q; ++i)
            counts.data<int32_t>()[(b * spec.heads_q + h) * spec.seq_q + i] =
                int32_t(core::conservative_split_count(vis, i, spec.tile_n, spec.split_kv));
      }
      base::HostTensor o(spec.o_type, {spec.batch, spec.seq_q, spec.heads_q, spec.dim_v});
      base::HostTensor lse(DType::f32, {spec.batch, spec.heads_q, spec.seq_q});
      CombineArgs a;
      a.partial_o = p.args().split.partial_o;
      a.partial_lse = p.args().split.partial_lse;
      a.counts = counts.view();
      a.o = o.view();
      a.lse = lse.view();
      const Status st = combine(a);
      ASSERT_TRUE(st.is_ok()) << st.message();
      std::vector<float> got_o, got_lse;
      for (int64_t e = 0; e < o.numel(); ++e) got_o.push_back(base::load_float(o.view(), e));
      for (int64_t e = 0; e < lse.numel(); ++e) got_lse.push_back(lse.data<float>()[e]);
      ASSERT_TRUE(values_bitwise_equal(want.o, got_o, "O"));
      ASSERT_TRUE(values_bitwise_equal(want.lse, got_lse, "LSE"));
    }
  }
}

}  // namespace
}  // namespace mxattn::test
