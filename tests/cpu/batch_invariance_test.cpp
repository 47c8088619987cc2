// spec §3 batch invariance: with split_kv = auto, a sequence's output is bit for bit the same alone
// and inside a batch of sequences of other lengths, on both CPU engines (the fast one with every
// kernel set).
#include <gtest/gtest.h>

#include <cstdint>

#include "cpu/compare.h"
#include "cpu/runners.h"
#include "cpu/test_problem.h"

namespace mxattn::test {
namespace {

class BatchInvariance : public ::testing::TestWithParam<CpuRunner> {};

// Sequence b of a dense problem on its own: batch 1, keys cut to its length.
std::pair<Spec, ProblemData> alone(const Spec& spec, const ProblemData& d, int64_t b) {
  Spec one = spec;
  const int64_t len = spec.kv_len_of(b);
  one.batch = 1;
  one.seq_k = std::max<int64_t>(len, 1);
  one.kv_len = {int32_t(len)};
  if (spec.causal == Causal::prefix) one.prefix_offset = {spec.prefix_offset[size_t(b)]};
  ProblemData data;
  const auto slice = [&](const std::vector<float>& src, int64_t rows, int64_t keep) {
    const auto first = src.begin() + b * rows;
    std::vector<float> out(first, first + keep);
    out.resize(size_t(one.seq_k * (rows / spec.seq_k)), 0.0f);
    return out;
  };
  const int64_t q_rows = spec.seq_q * spec.heads_q * spec.dim_qk;
  data.q.assign(d.q.begin() + b * q_rows, d.q.begin() + (b + 1) * q_rows);
  data.k = slice(d.k, spec.seq_k * spec.heads_kv * spec.dim_qk, len * spec.heads_kv * spec.dim_qk);
  data.v = slice(d.v, spec.seq_k * spec.heads_kv * spec.dim_v, len * spec.heads_kv * spec.dim_v);
  if (!d.k_mean.empty()) {
    const int64_t n = spec.heads_kv * spec.dim_qk;
    data.k_mean.assign(d.k_mean.begin() + b * n, d.k_mean.begin() + (b + 1) * n);
  }
  return {one, data};
}

TEST_P(BatchInvariance, AutoSplitIgnoresTheRestOfTheBatch) {
  for (uint64_t seed = 11001; seed <= 11012; ++seed) {
    SpecRange range;
    range.paged = false;
    range.sparse = false;
    range.split = false;
    range.max_work = 1'500'000;
    range.max_seq_k = 200;
    range.bf16_inputs = seed % 4 == 0;  // the AMX kernels' single-part problems
    Spec spec = random_spec(seed, range);
    spec.batch = 3;
    spec.seq_k = std::max<int64_t>(spec.seq_k, 96);
    spec.kv_len = {int32_t(spec.seq_k), int32_t(spec.seq_k / 3), int32_t(seed % 7)};
    if (spec.causal == Causal::prefix) spec.prefix_offset = {5, 40, 0};
    spec.split_kv = 0;
    spec.tile_n = 8;
    spec.tile_m = 16;
    spec.lse = true;
    SCOPED_TRACE(spec.describe());
    TestProblem batch(spec);
    ASSERT_TRUE(GetParam().run(batch).is_ok());
    const Outputs together = batch.outputs();
    for (int64_t b = 0; b < spec.batch; ++b) {
      SCOPED_TRACE(b);
      const auto [one, data] = alone(spec, batch.data(), b);
      TestProblem p(one, data);
      ASSERT_TRUE(GetParam().run(p).is_ok());
      const Outputs single = p.outputs();
      const int64_t o_size = spec.seq_q * spec.heads_q * spec.dim_v;
      const int64_t lse_size = spec.heads_q * spec.seq_q;
      const std::vector<float> o(together.o.begin() + b * o_size,
                                 together.o.begin() + (b + 1) * o_size);
      const std::vector<float> lse(together.lse.begin() + b * lse_size,
                                   together.lse.begin() + (b + 1) * lse_size);
      ASSERT_TRUE(values_bitwise_equal(o, single.o, "O"));
      ASSERT_TRUE(values_bitwise_equal(lse, single.lse, "LSE"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuEngines, BatchInvariance, ::testing::ValuesIn(cpu_runners()),
                         runner_name);

}  // namespace
}  // namespace mxattn::test
