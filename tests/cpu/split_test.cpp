// Split-KV on both CPU engines, the fast one with every kernel set: every split count agrees with
// the unsplit result, the fast engine's partials agree with the reference's split by split, and
// early exit leaves unused splits unwritten.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "cpu/compare.h"
#include "cpu/runners.h"
#include "cpu/test_problem.h"

namespace mxattn::test {
namespace {

class SplitTest : public ::testing::TestWithParam<CpuRunner> {};

// Small problems with small key tiles, so that a handful of split counts covers "beyond the tiles".
SpecRange split_range() {
  SpecRange r;
  r.max_work = 600'000;
  r.max_seq_k = 100;
  r.split = false;
  return r;
}

TEST_P(SplitTest, EverySplitCountMatchesUnsplit) {
  for (uint64_t seed = 1001; seed <= 1012; ++seed) {
    Spec spec = random_spec(seed, split_range());
    spec.tile_n = seed % 2 ? 8 : 16;
    spec.tile_m = seed % 3 ? 16 : 1;
    SCOPED_TRACE(spec.describe());
    TestProblem unsplit(spec);
    ASSERT_TRUE(GetParam().run(unsplit).is_ok());
    const Outputs want = unsplit.outputs();
    const int32_t beyond = int32_t((spec.seq_k + spec.tile_n - 1) / spec.tile_n + 2);
    for (int32_t split_kv = 0; split_kv <= beyond; ++split_kv) {
      Spec split = spec;
      split.split_kv = split_kv;
      split.partials = split_kv % 2 == 0;
      split.counts = true;
      split.early_exit = split_kv % 3 == 0;
      SCOPED_TRACE(split_kv);
      TestProblem p(split);
      ASSERT_TRUE(GetParam().run(p).is_ok());
      const Outputs got = p.outputs();
      ASSERT_TRUE(empty_rows_exact(p, got));
      ASSERT_TRUE(
          values_close(want.o, got.o, output_tolerance(spec.o_type, max_abs_value(p)), "O"));
      ASSERT_TRUE(values_close(want.lse, got.lse, lse_tolerance(), "LSE"));
    }
  }
}

// After a run with early exit, every slot at or past a row's count still holds the NaN poison, and
// O and LSE are bit for bit those of the run that wrote every split.
TEST_P(SplitTest, EarlyExitLeavesUnusedSplitsUnwritten) {
  int64_t untouched_slots = 0;
  for (uint64_t seed = 2001; seed <= 2025; ++seed) {
    Spec spec = random_spec(seed, split_range());
    spec.split_kv = seed % 4 == 0 ? 0 : int32_t(2 + seed % 5);
    spec.tile_n = 8;
    spec.tile_m = int32_t(seed % 2 ? 4 : 16);
    spec.partials = true;
    spec.counts = true;
    SCOPED_TRACE(spec.describe());
    TestProblem every_split(spec);
    ASSERT_TRUE(GetParam().run(every_split).is_ok());
    const Outputs want = every_split.outputs();

    spec.early_exit = true;
    TestProblem p(spec);
    ASSERT_TRUE(GetParam().run(p).is_ok());
    const Outputs got = p.outputs();
    ASSERT_TRUE(values_bitwise_equal(want.o, got.o, "O"));
    ASSERT_TRUE(values_bitwise_equal(want.lse, got.lse, "LSE"));
    ASSERT_EQ(want.counts, got.counts);
    const int64_t rows = spec.batch * spec.heads_q * spec.seq_q;
    for (int64_t b = 0; b < spec.batch; ++b)
      for (int64_t h = 0; h < spec.heads_q; ++h)
        for (int64_t i = 0; i < spec.seq_q; ++i) {
          const int64_t row = (b * spec.heads_q + h) * spec.seq_q + i;
          const int64_t count = got.counts[size_t(row)];
          for (int64_t s = count; s < p.slots(); ++s) {
            ASSERT_TRUE(std::isnan(got.partial_lse[size_t(s * rows + row)]))
                << "L_s written at slot " << s << " of row " << row << " (count " << count << ")";
            const size_t o_at = size_t(((s * spec.batch + b) * spec.seq_q + i) * spec.heads_q + h) *
                                size_t(spec.dim_v);
            ASSERT_TRUE(std::isnan(got.partial_o[o_at])) << "O_s written at slot " << s;
            ++untouched_slots;
          }
        }
  }
  EXPECT_GT(untouched_slots, 0);
}

INSTANTIATE_TEST_SUITE_P(CpuEngines, SplitTest, ::testing::ValuesIn(cpu_runners()), runner_name);

// The partials of `got` against those of `want`, slot by slot below each row's exact count.
::testing::AssertionResult partials_close(const Spec& spec, int64_t slots, const Outputs& want,
                                          const Outputs& got) {
  if (want.counts != got.counts) return ::testing::AssertionFailure() << "counts differ";
  const int64_t rows = spec.batch * spec.heads_q * spec.seq_q;
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t b = 0; b < spec.batch; ++b)
      for (int64_t h = 0; h < spec.heads_q; ++h)
        for (int64_t i = 0; i < spec.seq_q; ++i) {
          const int64_t row = (b * spec.heads_q + h) * spec.seq_q + i;
          if (s >= want.counts[size_t(row)]) continue;
          const size_t at = size_t(s * rows + row);
          const size_t o_at = size_t(((s * spec.batch + b) * spec.seq_q + i) * spec.heads_q + h) *
                              size_t(spec.dim_v);
          const std::vector<float> want_o(want.partial_o.begin() + int64_t(o_at),
                                          want.partial_o.begin() + int64_t(o_at) + spec.dim_v);
          const std::vector<float> got_o(got.partial_o.begin() + int64_t(o_at),
                                         got.partial_o.begin() + int64_t(o_at) + spec.dim_v);
          auto r =
              values_close({want.partial_lse[at]}, {got.partial_lse[at]}, lse_tolerance(), "L_s");
          if (r) r = values_close(want_o, got_o, output_tolerance(DType::f32, 0), "O_s");
          if (!r) return r << " (slot " << s << ", row " << row << ")";
        }
  return ::testing::AssertionSuccess();
}

// The fast engine's partials on spec against the reference's, with every kernel set.
void expect_fast_partials_match(const Spec& spec) {
  SCOPED_TRACE(spec.describe());
  TestProblem p(spec);
  ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
  const Outputs want = p.outputs();
  for (const CpuRunner& runner : fast_runners()) {
    SCOPED_TRACE(runner.name());
    ASSERT_TRUE(runner.run(p).is_ok());
    ASSERT_TRUE(partials_close(spec, p.slots(), want, p.outputs()));
  }
}

// Random problems' partials, split by split.
TEST(SplitPartials, FastMatchesReferenceSplitBySplit) {
  for (uint64_t seed = 3001; seed <= 3040; ++seed) {
    Spec spec = random_spec(seed, split_range());
    spec.split_kv = seed % 3 == 0 ? 0 : int32_t(1 + seed % 6);
    spec.tile_n = int32_t(seed % 2 ? 8 : 32);
    spec.tile_m = int32_t(seed % 5 ? 16 : 64);
    spec.partials = true;
    spec.counts = true;
    spec.early_exit = seed % 2 == 0;
    ASSERT_NO_FATAL_FAILURE(expect_fast_partials_match(spec));
  }
}

// bf16 Q, K, V and O with many rows a tile (the AMX kernels, on the sets that have them): the
// weights may be kept to bf16 for O, but the f32 partials the caller asked for are still within
// the f32 tolerance, split by split.
TEST(SplitPartials, Bf16OutputKeepsF32Partials) {
  SpecRange range = split_range();
  range.bf16_inputs = true;
  range.max_seq_q = 80;
  for (uint64_t seed = 3101; seed <= 3120; ++seed) {
    Spec spec = random_spec(seed, range);
    spec.seq_q = std::max<int64_t>(spec.seq_q, 17);
    spec.o_type = DType::bf16;
    spec.split_kv = seed % 3 == 0 ? 0 : int32_t(1 + seed % 4);
    spec.tile_n = 32;
    spec.tile_m = 64;
    spec.partials = true;
    spec.counts = true;
    ASSERT_NO_FATAL_FAILURE(expect_fast_partials_match(spec));
  }
}

}  // namespace
}  // namespace mxattn::test
