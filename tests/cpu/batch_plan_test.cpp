// The batch plan (spec §12) on the CPU: planned once for capacities, run over steps whose lengths,
// block tables and tokens change; each run equals the ragged call with the same arguments,
// bitwise; runs past the capacities or unlike the plan are named errors with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/batch.h"
#include "mxattn/mx.h"

namespace mxattn::test {
namespace {

using base::HostTensor;

constexpr int64_t kSequences = 5, kRows = 48, kPageSize = 16, kPages = 40, kHq = 4, kHkv = 2,
                  kD = 64;

BatchShape shape_of(DType kv) {
  BatchShape s;
  s.max_sequences = kSequences;
  s.max_query_rows = kRows;
  s.max_kv_len = 8 * kPageSize;
  s.page_size = kPageSize;
  s.num_pages = kPages;
  s.heads_q = kHq;
  s.heads_kv = kHkv;
  s.dim_qk = s.dim_v = kD;
  s.q_type = DType::bf16;
  s.k_type = s.v_type = kv;
  s.o_type = DType::f32;
  s.lse = true;
  s.split.split_kv = 0;
  return s;
}

// The caches, written once with random keys (the steps change everything else).
struct Pools {
  explicit Pools(DType kv) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    HostTensor values(DType::f32, {kPages, kPageSize, kHkv, kD});
    for (HostTensor* t : {&k, &v}) {
      for (int64_t e = 0; e < values.numel(); ++e) values.data<float>()[e] = normal(rng);
      *t = HostTensor(kv, {kPages, kPageSize, kHkv, kD});
      HostTensor& sc = t == &k ? k_scales : v_scales;
      if (is_mx(kv)) {
        sc = HostTensor(DType::e8m0, {kPages, kPageSize, kHkv, kD / 32});
        EXPECT_TRUE(quantize(values.view(), t->view(), sc.view(), 3, ScaleMode::floor).is_ok());
      } else {
        for (int64_t e = 0; e < values.numel(); ++e) {
          base::store_float(t->view(), e, values.data<float>()[e]);
        }
      }
    }
  }
  HostTensor k, v, k_scales, v_scales;
};

struct Step {
  std::vector<int32_t> cu, lens, table;
  HostTensor q, o, lse;
  BatchRun run(const Pools& p) {
    const int64_t sequences = int64_t(lens.size());
    BatchRun r;
    r.q = q.view();
    r.k = p.k.view();
    r.v = p.v.view();
    if (p.k_scales.bytes() > 0) {
      r.k_scales = p.k_scales.view();
      r.v_scales = p.v_scales.view();
    }
    r.o = o.view();
    r.lse = lse.view();
    r.cu_seqlens_q = make_view(cu.data(), DType::i32, {sequences + 1});
    r.seq_lens = make_view(lens.data(), DType::i32, {sequences});
    r.block_table = make_view(table.data(), DType::i32, {sequences, 8});
    return r;
  }
};

Step random_step(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Step s;
  const int64_t sequences = pick(1, kSequences);
  s.cu = {0};
  for (int64_t b = 0; b < sequences; ++b) {
    const int64_t rows = pick(0, 2) == 0 ? pick(2, kRows / kSequences) : 1;
    s.cu.push_back(s.cu.back() + int32_t(rows));
    s.lens.push_back(int32_t(pick(rows, 8 * kPageSize)));
  }
  std::vector<int32_t> pages(kPages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  s.table.assign(pages.begin(), pages.begin() + sequences * 8);
  const int64_t total = s.cu.back();
  s.q = HostTensor(DType::bf16, {total, kHq, kD});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t e = 0; e < s.q.numel(); ++e) base::store_float(s.q.view(), e, normal(rng));
  s.o = HostTensor(DType::f32, {total, kHq, kD});
  s.lse = HostTensor(DType::f32, {kHq, total});
  return s;
}

TEST(BatchPlan, RunsEqualRaggedCallsAcrossSteps) {
  for (const DType kv : {DType::bf16, DType::e4m3, DType::e2m1}) {
    SCOPED_TRACE(name_of(kv));
    const Pools pools(kv);
    BatchPlan plan;
    ASSERT_TRUE(BatchPlan::plan(shape_of(kv), {}, &plan).is_ok());
    for (uint64_t step = 0; step < 8; ++step) {
      Step s = random_step(100 + step);
      const BatchRun r = s.run(pools);
      const Status st = plan.run(r);
      ASSERT_TRUE(st.is_ok()) << st.message();
      // The same arguments as a ragged call of their own.
      Step fresh = random_step(100 + step);
      RaggedArgs a;
      const BatchRun f = fresh.run(pools);
      a.q = f.q;
      a.cu_seqlens_q = f.cu_seqlens_q;
      a.seq_lens = f.seq_lens;
      a.k = f.k;
      a.v = f.v;
      a.k_scales = f.k_scales;
      a.v_scales = f.v_scales;
      a.paged.page_size = kPageSize;
      a.paged.block_table = f.block_table;
      a.o = f.o;
      a.lse = f.lse;
      a.causal = Causal::bottom_right;
      a.split.split_kv = 0;
      ASSERT_TRUE(attention(a).is_ok());
      for (int64_t e = 0; e < s.o.numel(); ++e) {
        ASSERT_EQ(s.o.data<float>()[e], fresh.o.data<float>()[e]) << "step " << step;
      }
      for (int64_t e = 0; e < s.lse.numel(); ++e) {
        const float x = s.lse.data<float>()[e], y = fresh.lse.data<float>()[e];
        ASSERT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << "step " << step;
      }
    }
  }
}

TEST(BatchPlan, RunsPastTheCapacitiesAreNamed) {
  const Pools pools(DType::bf16);
  BatchPlan plan;
  ASSERT_TRUE(BatchPlan::plan(shape_of(DType::bf16), {}, &plan).is_ok());
  Step s = random_step(3);
  s.lens[0] = 9 * kPageSize;
  Status st = plan.run(s.run(pools));
  EXPECT_NE(st.message().find("seq_lens[0] = 144 is past the plan's max_kv_len (128)"),
            std::string::npos)
      << st.message();
  Step t = random_step(4);
  BatchRun r = t.run(pools);
  r.o.dtype = DType::bf16;
  st = plan.run(r);
  EXPECT_NE(st.message().find("o must be f32 as planned, found bf16"), std::string::npos)
      << st.message();
  BatchShape bad = shape_of(DType::bf16);
  bad.heads_q = 3;
  st = BatchPlan::plan(bad, {}, &plan);
  EXPECT_NE(st.message().find("heads_q (3) must be a multiple of heads_kv (2)"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace mxattn::test
