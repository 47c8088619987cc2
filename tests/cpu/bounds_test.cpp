// spec §7 bounds: every view in a buffer of exactly its logical size, ending against an unmapped
// page, runs on every path without a fault, on the reference and every fast kernel set; one byte
// less is rejected before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/compare.h"
#include "cpu/runners.h"
#include "cpu/test_problem.h"

namespace mxattn::test {
namespace {

// One spec per path: dense, paged, sparse, split with partials, each MX format on Q, K and V with
// V's scales along either axis, strided views.
std::vector<Spec> path_specs() {
  std::vector<Spec> specs;
  Spec base;
  base.batch = 2;
  base.seq_q = 5;
  base.seq_k = 45;
  base.heads_q = 3;
  base.heads_kv = 1;
  base.dim_qk = 32;
  base.dim_v = 64;
  base.kv_len = {45, 13};
  base.causal = Causal::bottom_right;
  base.lse = true;
  specs.push_back(base);

  Spec paged = base;
  paged.page_size = 16;
  paged.seq_k = 48;
  paged.spare_pages = 1;
  specs.push_back(paged);

  Spec sparse = base;
  sparse.block_q = 16;
  sparse.block_k = 16;
  sparse.sparse_density = 0.6;
  specs.push_back(sparse);

  Spec split = base;
  split.split_kv = 3;
  split.tile_n = 8;
  split.partials = true;
  split.counts = true;
  split.early_exit = true;
  split.k_mean = true;
  specs.push_back(split);

  for (DType t : {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1}) {
    for (VScaleAxis axis : {VScaleAxis::head_dim, VScaleAxis::keys}) {
      Spec mx = axis == VScaleAxis::keys ? paged : base;
      mx.page_size = axis == VScaleAxis::keys ? 32 : 0;
      mx.seq_k = axis == VScaleAxis::keys ? 64 : 45;
      mx.q_type = mx.k_type = mx.v_type = t;
      mx.v_axis = axis;
      mx.split_kv = 0;
      mx.tile_n = 8;
      mx.partials = true;
      specs.push_back(mx);
      Spec dense_keys = mx;
      dense_keys.page_size = 0;
      dense_keys.seq_k = 45;
      dense_keys.strided = true;
      specs.push_back(dense_keys);
    }
  }
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SpecRange range;
    range.max_work = 300'000;
    range.bf16_inputs = seed % 4 == 0;  // the AMX kernels' single-part problems
    specs.push_back(random_spec(10'000 + seed, range));
  }
  for (uint64_t n = 0; n < specs.size(); ++n) specs[n].seed = 77 + n;
  return specs;
}

TEST(Bounds, ExactSizeBuffersAgainstAGuardPage) {
  for (const Spec& spec : path_specs()) {
    SCOPED_TRACE(spec.describe());
    TestProblem roomy(spec);
    ASSERT_TRUE(roomy.run(Engine::cpu_reference).is_ok());
    const Outputs want = roomy.outputs();

    TestProblem tight(spec);
    tight.place_in_guarded_memory();
    for (const CpuRunner& runner : cpu_runners()) {
      SCOPED_TRACE(runner.name());
      const Status st = runner.run(tight);
      ASSERT_TRUE(st.is_ok()) << st.message();
    }
    ASSERT_TRUE(tight.run(Engine::cpu_reference).is_ok());
    ASSERT_TRUE(outputs_bitwise_equal(want, tight.outputs()));
  }
}

TEST(Bounds, OneByteLessIsRejectedAndNothingIsWritten) {
  for (const Spec& spec : path_specs()) {
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    p.place_in_guarded_memory();
    AttentionArgs args = p.args();
    for (const NamedView& nv : given_views(args)) {
      SCOPED_TRACE(nv.name);
      const int64_t exact = nv.view->bytes;
      nv.view->bytes = exact - 1;
      p.poison_outputs();
      RunOptions options;
      options.engine = Engine::cpu_reference;
      const Status st = attention(args, options);
      nv.view->bytes = exact;
      EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();
      const Outputs out = p.outputs();
      for (float x : out.o) ASSERT_TRUE(std::isnan(x)) << "O written despite the error";
      for (float x : out.lse) ASSERT_TRUE(std::isnan(x)) << "LSE written despite the error";
    }
  }
}

}  // namespace
}  // namespace mxattn::test
