// The CUDA decode engine against the f64 CPU reference on random problems of every feature it
// supports, outputs poisoned before each run; partials split by split against the reference run
// with the same partition; exact results of rows that see nothing; CUDA graph replay; batch
// invariance; errors.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cpu/compare.h"
#include "cpu/test_problem.h"
#include "cuda/device_problem.h"
#include "mxattn/cuda.h"

namespace mxattn::test {
namespace {

// The engine rounds P to bf16 (f16 for f16 values) before P V, as flash attention does; scores and
// sums stay f32.
Tolerance decode_output_tolerance(DType type) {
  const double rounding = type == DType::bf16 ? 0x1p-7 : type == DType::f16 ? 0x1p-10 : 0.0;
  return {4e-3, 4e-3 + rounding};
}
Tolerance decode_lse_tolerance() {
  return {5e-4, 5e-5};
}

// A random problem within what the CUDA decode engine supports, K and V stored as `kv`.
Spec decode_spec(uint64_t seed, DType kv, int64_t max_keys, int64_t max_work) {
  Rng rng(seed);

  Spec s;

  s.partition = api::EngineKind::cuda_decode;
  s.seed = seed;
  s.k_type = s.v_type = kv;
  s.q_type = rng.pick(std::vector<DType>{DType::f32, DType::f16, DType::bf16, DType::e4m3,
                                         DType::e3m2, DType::e2m1});
  s.o_type = rng.pick(std::vector<DType>{DType::f32, DType::f16, DType::bf16});
  const int64_t dims = rng.uniform(0, 9);
  s.dim_qk = dims < 4 ? 64 : dims < 7 ? 128 : dims < 9 ? 192 : 256;
  s.dim_v = s.dim_qk == 192 ? 128 : s.dim_qk;
  if (is_mx(kv) && rng.chance(0.5)) s.v_axis = VScaleAxis::keys;
  if (rng.chance(0.5)) s.scale_mode = ScaleMode::rceil;
  s.batch = rng.uniform(1, 3);
  s.heads_kv = rng.uniform(1, 3);
  s.heads_q = s.heads_kv * rng.pick(std::vector<int64_t>{1, 2, 3, 4, 5, 8});
  s.seq_q = rng.chance(0.5) ? 1 : rng.uniform(2, 16);
  if (rng.chance(0.3)) {
    s.page_size = s.v_axis == VScaleAxis::keys ? rng.pick(std::vector<int64_t>{32, 64})
                                               : rng.pick(std::vector<int64_t>{16, 32, 64});
    s.seq_k = s.page_size * rng.uniform(1, std::max<int64_t>(1, max_keys / s.page_size));
    s.spare_pages = rng.uniform(0, 2);
  } else {
    s.seq_k = rng.uniform(1, max_keys);
  }
  while (work_of(s) > max_work) {
    if (s.seq_q > 2) {
      s.seq_q = (s.seq_q + 1) / 2;
    } else if (s.batch > 1) {
      --s.batch;
    } else if (s.heads_kv > 1) {
      s.heads_q -= s.heads_q / s.heads_kv;
      --s.heads_kv;
    } else if (s.seq_k > (s.paged() ? s.page_size : 16)) {
      s.seq_k = s.paged() ? s.seq_k - s.page_size : s.seq_k / 2;
    } else {
      break;
    }
  }
  draw_masks(rng, 0.6, 0, s);
  if (rng.chance(0.2)) s.scale = float(rng.real(0.05, 0.5));
  s.lse = rng.chance(0.85);
  const double r = rng.real(0, 1);
  s.split_kv = r < 0.3 ? 1 : r < 0.7 ? int32_t(rng.uniform(2, 8)) : 0;
  s.tile_m = rng.pick(std::vector<int32_t>{1, 4, 8, 16});
  s.tile_n = rng.pick(std::vector<int32_t>{16, 32, 64});
  s.early_exit = rng.chance(0.4);
  s.partials = rng.chance(0.5);
  s.counts = rng.chance(0.4);
  s.poison_padding = true;
  // A larger gain makes some softmaxes peaked, where the max subtraction matters.
  if (rng.chance(0.3)) s.q_gain = 3.0f;
  return s;
}

// Plans on `dev`'s arguments, poisons the outputs, runs and copies the outputs into `host`.
Status run_cuda(TestProblem& host, DeviceProblem& dev, const cuda::DecodeOptions& options = {}) {
  cuda::DecodePlan plan;
  if (Status st = cuda::plan_decode(dev.args(), &plan, options); !st) return st;
  return run_and_download(host, dev, [&] { return cuda::run_decode(plan, dev.args(), nullptr); });
}

// O, LSE and counts against the reference; with partials, every split the partition writes (all
// of a tile's splits, or those below its exact count in early-exit mode), split by split.
void expect_matches(const TestProblem& ref, const Outputs& want, const Outputs& got) {
  const Spec& s = ref.spec();
  EXPECT_TRUE(values_close(want.o, got.o, decode_output_tolerance(s.o_type), "O"));
  if (s.lse) {
    EXPECT_TRUE(values_close(want.lse, got.lse, decode_lse_tolerance(), "LSE"));
  }
  if (s.counts) {
    EXPECT_EQ(want.counts, got.counts);
  }
  if (!s.partials) return;
  core::Problem p;
  ASSERT_TRUE(core::validate_problem(ref.args(), &p).is_ok());
  expect_partials_match(ref, p, api::split_params(p, s.partition), want, got,
                        decode_output_tolerance(DType::f32), decode_lse_tolerance());
}

// One random problem: the reference on one copy, the CUDA engine on another.
void check_random_problem(const Spec& spec, const cuda::DecodeOptions& options = {}) {
  SCOPED_TRACE(spec.describe() + " splits_per_cta=" + std::to_string(options.splits_per_cta));
  TestProblem ref(spec);
  ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
  TestProblem got(spec);
  DeviceProblem dev(got);
  const Status st = run_cuda(got, dev, options);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_matches(ref, ref.outputs(), got.outputs());
}

const DType kKvTypes[] = {DType::bf16, DType::f16,  DType::e4m3, DType::e5m2,
                          DType::e2m3, DType::e3m2, DType::e2m1};

class CudaDecodeRandom : public ::testing::TestWithParam<DType> {};

TEST_P(CudaDecodeRandom, MatchesReference) {
  for (uint64_t n = 0; n < 24; ++n) {
    check_random_problem(decode_spec(1000 * uint64_t(GetParam()) + n, GetParam(), 640, 6'000'000));
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, CudaDecodeRandom, ::testing::ValuesIn(kKvTypes),
                         [](const auto& param_info) {
                           return std::string(name_of(param_info.param));
                         });

// Small problems of every storage type, for compute-sanitizer's memcheck and racecheck.
class CudaDecodeSanitized : public ::testing::TestWithParam<DType> {};

TEST_P(CudaDecodeSanitized, MatchesReference) {
  for (uint64_t n = 0; n < 3; ++n) {
    check_random_problem(
        decode_spec(77 + 1000 * uint64_t(GetParam()) + n, GetParam(), 200, 300'000));
  }
  // CTAs computing several splits each (16-bit caches; the merges between splits run through the
  // stages).
  for (uint64_t n = 3; n < 5; ++n) {
    Spec s = decode_spec(77 + 1000 * uint64_t(GetParam()) + n, GetParam(), 200, 300'000);
    s.split_kv = 6;
    s.tile_n = 16;
    check_random_problem(s, cuda::DecodeOptions{.splits_per_cta = 3});
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, CudaDecodeSanitized, ::testing::ValuesIn(kKvTypes),
                         [](const auto& param_info) {
                           return std::string(name_of(param_info.param));
                         });

Spec fixed_spec(DType kv) {
  Spec s;
  s.partition = api::EngineKind::cuda_decode;
  s.seed = 5;
  s.k_type = s.v_type = kv;
  s.q_type = DType::bf16;
  s.o_type = DType::f32;
  s.dim_qk = s.dim_v = 128;
  s.batch = 3;
  s.heads_kv = 2;
  s.heads_q = 8;
  s.seq_q = 1;
  s.seq_k = 512;
  s.kv_len = {512, 300, 77};
  s.split_kv = 0;
  s.tile_m = 16;
  s.tile_n = 32;
  s.poison_padding = true;
  return s;
}

// Rows that see no key: O exactly +0 and LSE exactly -inf, in the output and in every partial.
TEST(CudaDecode, RowsThatSeeNothingAreExactlyZero) {
  for (DType kv : {DType::bf16, DType::e2m1}) {
    Spec s = fixed_spec(kv);
    s.seq_q = 8;
    s.seq_k = 64;
    s.kv_len = {0, 5, 64};
    s.causal = Causal::bottom_right;  // off = kv_len - 8: rows below 8 - kv_len see nothing
    s.window = 2;
    s.split_kv = 3;
    s.tile_n = 16;
    s.partials = true;
    SCOPED_TRACE(s.describe());
    TestProblem got(s);
    DeviceProblem dev(got);
    const Status st = run_cuda(got, dev);
    ASSERT_TRUE(st.is_ok()) << st.message();
    const Outputs out = got.outputs();
    int64_t empty_rows = 0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i) {
          if (!got.row_sees_nothing(b, h, i)) continue;
          ++empty_rows;
          EXPECT_EQ(out.lse[size_t((b * s.heads_q + h) * s.seq_q + i)], -INFINITY);
          for (int64_t d = 0; d < s.dim_v; ++d) {
            const float x = out.o[size_t(((b * s.seq_q + i) * s.heads_q + h) * s.dim_v + d)];
            EXPECT_TRUE(x == 0.0f && !std::signbit(x)) << "b " << b << " h " << h << " i " << i;
          }
          for (int64_t sl = 0; sl < s.split_kv; ++sl) {
            EXPECT_EQ(out.partial_lse[size_t(partial_lse_index(s, sl, b, h, i))], -INFINITY);
            EXPECT_EQ(out.partial_o[size_t(partial_o_index(s, sl, b, i, h, 0))], 0.0f);
          }
        }
    EXPECT_GT(empty_rows, 0);
  }
}

// A captured decode step replays correctly with new contents in the same buffers.
TEST(CudaDecode, GraphReplayComputesNewInputs) {
  for (DType kv : {DType::bf16, DType::e4m3}) {
    Spec s = fixed_spec(kv);
    if (kv == DType::e4m3) {
      s.page_size = 32;
      s.split_kv = 4;
    }
    SCOPED_TRACE(s.describe());
    TestProblem first(s);
    Spec s2 = s;
    s2.seed = s.seed + 1;
    ProblemData data2 = generate_data(s2);
    data2.block_table = first.data().block_table;  // the plan holds the first problem's table
    TestProblem second(s2, data2);
    TestProblem got(s);
    DeviceProblem dev(got);
    cuda::DecodePlan plan;
    const Status planned = cuda::plan_decode(dev.args(), &plan);
    ASSERT_TRUE(planned.is_ok()) << planned.message();
    ASSERT_TRUE(plan.combines());
    expect_graph_replays(
        dev, [&](cudaStream_t stream) { return cuda::run_decode(plan, dev.args(), stream); },
        {&first, &second}, got,
        [&](TestProblem& problem) { expect_matches(problem, problem.outputs(), got.outputs()); });
  }
}

// A sequence's output is bitwise the same alone or in a batch (auto split_kv looks only at the
// sequence's own length).
TEST(CudaDecode, AutoSplitIsBatchInvariant) {
  Spec big = fixed_spec(DType::e4m3);
  big.split_kv = 0;
  const ProblemData data = generate_data(big);
  Spec one = big;
  one.batch = 1;
  one.kv_len = {big.kv_len[1]};
  ProblemData single;
  const auto slice = [](const std::vector<float>& all, int64_t batches) {
    const int64_t per = int64_t(all.size()) / batches;
    return std::vector<float>(all.begin() + per, all.begin() + 2 * per);
  };
  single.q = slice(data.q, big.batch);
  single.k = slice(data.k, big.batch);
  single.v = slice(data.v, big.batch);
  TestProblem batched(big, data), alone(one, single);
  DeviceProblem dev_batched(batched), dev_alone(alone);
  ASSERT_TRUE(run_cuda(batched, dev_batched).is_ok());
  ASSERT_TRUE(run_cuda(alone, dev_alone).is_ok());
  const Outputs a = batched.outputs(), b = alone.outputs();
  const size_t row = size_t(big.heads_q * big.dim_v);
  const std::vector<float> entry(a.o.begin() + row, a.o.begin() + 2 * row);
  EXPECT_TRUE(values_bitwise_equal(entry, b.o, "O of batch entry 1"));
}

// A CTA computing several consecutive splits (DecodeOptions::splits_per_cta; the kernels of 16-bit
// caches) writes every output, partial and count bitwise as one split a CTA does, on random
// problems (paged, masked, per-sequence lengths, several query tiles), and matches the reference.
TEST(CudaDecode, SplitsPerCtaChangeNoBit) {
  int64_t chained_problems = 0, runs = 0;
  for (const DType kv : {DType::bf16, DType::f16}) {
    for (uint64_t n = 0; n < 12; ++n) {
      Spec s = decode_spec(5000 + 1000 * uint64_t(kv) + n, kv, 1500, 8'000'000);
      s.split_kv = std::vector<int32_t>{0, 4, 6, 8, 12}[n % 5];
      s.tile_n = 16;
      SCOPED_TRACE(s.describe());
      TestProblem ref(s);
      ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
      TestProblem one(s), got(s);
      DeviceProblem dev(one);
      ASSERT_TRUE(run_cuda(one, dev, cuda::DecodeOptions{.splits_per_cta = 1}).is_ok());
      cuda::DecodePlan single;
      ASSERT_TRUE(cuda::plan_decode(dev.args(), &single, {.splits_per_cta = 1}).is_ok());
      for (const int32_t per_cta : {2, 3, 8}) {
        SCOPED_TRACE("splits_per_cta=" + std::to_string(per_cta));
        cuda::DecodePlan plan;
        ASSERT_TRUE(cuda::plan_decode(dev.args(), &plan, {.splits_per_cta = per_cta}).is_ok());
        chained_problems += plan.split_blocks() < single.split_blocks();
        ++runs;
        const Status st = run_cuda(got, dev, cuda::DecodeOptions{.splits_per_cta = per_cta});
        ASSERT_TRUE(st.is_ok()) << st.message();
        EXPECT_TRUE(outputs_bitwise_equal(one.outputs(), got.outputs()));
      }
      expect_matches(ref, ref.outputs(), got.outputs());
    }
  }
  // Most problems have tiles of several splits, so that CTAs do chain them.
  EXPECT_GT(2 * chained_problems, runs);
}

// Tiles of many non-empty splits: 34 (split_kv 40 over 100 key tiles: the combine keeps each
// lane's two L_s and weights in registers, the second in use) and 100 (past 64: the combine reads
// L_s again per split), combined inside the split kernel and, with the counts asked for, by the
// combine kernel, at head dims 64 (half the lanes of a combine warp past Dv) and 128; all match
// the reference.
TEST(CudaDecode, ManySplitsCombine) {
  for (const int32_t splits : {40, 100}) {
    for (const bool counts : {false, true}) {
      Spec s = decode_spec(9100 + uint64_t(splits) + counts, DType::bf16, 1600, 4'000'000);
      s.dim_qk = s.dim_v = counts ? 128 : 64;
      s.batch = 1;
      s.heads_kv = 2;
      s.heads_q = 4;
      s.page_size = 0;
      s.spare_pages = 0;
      s.seq_k = 1600;
      s.kv_len = {};
      s.window = -1;
      s.causal = Causal::none;
      s.prefix_offset = {};
      s.tile_n = 16;  // 100 key tiles
      s.split_kv = splits;
      s.early_exit = false;
      s.partials = false;
      s.counts = counts;
      SCOPED_TRACE(s.describe());
      TestProblem ref(s);
      ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
      TestProblem got(s);
      DeviceProblem dev(got);
      ASSERT_TRUE(run_cuda(got, dev).is_ok());
      expect_matches(ref, ref.outputs(), got.outputs());
    }
  }
}

// Running the combine kernel again over the same partials reproduces O bitwise (the first runs
// combined inside the split kernel, as a plan without user partials or counts does); two runs
// agree bitwise.
TEST(CudaDecode, RunsAndCombineAreDeterministic) {
  Spec s = fixed_spec(DType::f16);
  s.kv_len = {};
  s.split_kv = 5;
  TestProblem got(s);
  DeviceProblem dev(got);
  ASSERT_TRUE(run_cuda(got, dev).is_ok());
  const Outputs first = got.outputs();
  ASSERT_TRUE(run_cuda(got, dev).is_ok());
  EXPECT_TRUE(values_bitwise_equal(first.o, got.outputs().o, "O of a second run"));

  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::plan_decode(dev.args(), &plan).is_ok());
  ASSERT_TRUE(cuda::run_decode(plan, dev.args(), nullptr).is_ok());
  ASSERT_TRUE(cuda_ok(cudaMemset(dev.args().o.data, 0xff, size_t(dev.args().o.bytes))));
  ASSERT_TRUE(cuda::run_combine(plan, dev.args(), nullptr).is_ok());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize()));
  dev.download_outputs(got);
  EXPECT_TRUE(values_bitwise_equal(first.o, got.outputs().o, "O of the combine alone"));
}

// The engine's own key tile (tile_n 0: default_tile_n of the cache's Sk), on caches long enough
// for 128-key tiles and short enough for 32-key ones.
TEST(CudaDecode, DefaultKeyTileMatchesReference) {
  for (const int64_t keys : {int64_t(1024), int64_t(4096)}) {
    for (DType kv : {DType::bf16, DType::e2m1}) {
      Spec s = fixed_spec(kv);
      s.seq_k = keys;
      s.kv_len = {int32_t(keys), int32_t(keys / 2 + 7), 77};
      s.tile_n = 0;
      check_random_problem(s);
    }
  }
}

// E8M0 scales 0 (2^-127) and 0xFF (NaN) on valid keys, K and V, both scale paths (in the stage for
// Dqk = Dv = 128, in registers for 64): NaN reaches exactly the outputs the reference gives NaN.
TEST(CudaDecode, ExtremeScalesMatchReference) {
  for (const int64_t dim : {int64_t(128), int64_t(64)}) {
    for (DType kv : {DType::e4m3, DType::e3m2, DType::e2m1}) {
      Spec s = fixed_spec(kv);
      s.dim_qk = s.dim_v = dim;
      SCOPED_TRACE(s.describe());
      TestProblem ref(s);
      TestProblem got(s, ref.data());
      for (TestProblem* problem : {&ref, &got}) {
        const AttentionArgs& a = problem->args();
        const auto set_scale = [](const TensorView& scales, int64_t b, int64_t key, int64_t h,
                                  int64_t block, uint8_t e) {
          static_cast<uint8_t*>(scales.data)[base::offset_of(scales, b, key, h, block)] = e;
        };
        set_scale(a.k_scales, 0, 100, 0, 1, 0xff);  // rows of (b 0, KV head 0): NaN
        set_scale(a.v_scales, 1, 50, 1, 1, 0xff);   // dims 32-63 of (b 1, KV head 1): NaN
        for (int64_t block = 0; block < dim / 32; ++block) {
          set_scale(a.k_scales, 2, 10, 0, block, 0);
          set_scale(a.v_scales, 2, 11, 1, block, 0);
        }
      }
      ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
      DeviceProblem dev(got);
      const Status st = run_cuda(got, dev);
      ASSERT_TRUE(st.is_ok()) << st.message();
      const Outputs want = ref.outputs();
      EXPECT_TRUE(std::isnan(want.o[0]));
      expect_matches(ref, want, got.outputs());
    }
  }
}

// The narrow MX kernel (CTAs of at most 8 packed rows, V scales along the head dim) applies V's
// scales in f16 while each step's scales stay in a window around the warp's exponent T, and takes
// the exact path for a step that leaves it. Keys whose V blocks differ by 2^24 within the key,
// scales far above and below the window, and a sequence whose first step's scales are tiny (T at
// its lower clamp, so that most of its steps leave the window): every path against the reference,
// and the general kernel on the same problem.
TEST(CudaDecode, NarrowMxScaleWindowMatchesReference) {
  for (const int64_t dim : {int64_t(128), int64_t(64)}) {
    for (DType kv : {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1}) {
      Spec s = fixed_spec(kv);
      s.dim_qk = s.dim_v = dim;
      SCOPED_TRACE(s.describe());
      TestProblem ref(s);
      TestProblem narrow(s, ref.data());
      TestProblem wide(s, ref.data());
      for (TestProblem* problem : {&ref, &narrow, &wide}) {
        const AttentionArgs& a = problem->args();
        const auto set_scale = [&](int64_t b, int64_t key, int64_t block, int e) {
          static_cast<uint8_t*>(a.v_scales.data)[base::offset_of(a.v_scales, b, key, 0, block)] =
              uint8_t(e);
        };
        set_scale(0, 40, 0, 127 + 12);  // one key, blocks 2^24 apart
        set_scale(0, 40, 1, 127 - 12);
        set_scale(0, 41, 0, 127 + 40);          // above every window
        set_scale(0, 300, 1, 127 - 40);         // below every window
        for (int64_t key = 0; key < 64; ++key)  // batch 2: its first steps' scales tiny
          for (int64_t block = 0; block < dim / 32; ++block) set_scale(2, key, block, 127 - 60);
      }
      ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
      const Outputs want = ref.outputs();
      for (const bool use_narrow : {true, false}) {
        SCOPED_TRACE(use_narrow ? "narrow kernel" : "general kernel");
        TestProblem& got = use_narrow ? narrow : wide;
        DeviceProblem dev(got);
        const Status st = run_cuda(got, dev, cuda::DecodeOptions{.narrow_mx = use_narrow});
        ASSERT_TRUE(st.is_ok()) << st.message();
        expect_matches(ref, want, got.outputs());
      }
    }
  }
}

// The general MX kernel on random problems where the engine would pick the narrow one (V scales
// along the head dim, at most 8 packed rows a CTA): it still serves wider CTAs and V scales along
// the keys, and stays the comparison for the narrow kernel.
TEST(CudaDecode, GeneralMxKernelWhereNarrowFits) {
  for (DType kv : {DType::e4m3, DType::e5m2, DType::e2m3, DType::e2m1}) {
    for (uint64_t n = 0; n < 6; ++n) {
      Spec s = decode_spec(5000 + 1000 * uint64_t(kv) + n, kv, 640, 6'000'000);
      s.v_axis = VScaleAxis::head_dim;
      s.tile_m = 1;
      check_random_problem(s, cuda::DecodeOptions{.narrow_mx = false});
    }
  }
}

// Many query tiles (Sq = 200: 13 tiles of 16 rows), causal from the bottom right, the auto split,
// GQA 4: the shape of a chunked-prefill step that the decode engine also serves when the caller
// asks for partials.
TEST(CudaDecode, ManyQueryTilesMatchReference) {
  for (DType kv : {DType::bf16, DType::e4m3}) {
    for (const bool partials : {false, true}) {
      Spec s = fixed_spec(kv);
      s.seq_q = 200;
      s.seq_k = 200;
      s.kv_len = {200, 150, 77};
      s.causal = Causal::bottom_right;
      s.lse = true;
      s.partials = partials;
      s.counts = partials;
      check_random_problem(s);
    }
  }
}

TEST(CudaDecode, RefusesWhatItDoesNotSupport) {
  Spec mixed = fixed_spec(DType::bf16);
  mixed.v_type = DType::e4m3;
  TestProblem a(mixed);
  cuda::DecodePlan plan;
  Status st = cuda::plan_decode(a.args(), &plan);
  EXPECT_EQ(st.code(), ErrorCode::unsupported) << st.message();
  EXPECT_FALSE(plan.ready());

  Spec small_dims = fixed_spec(DType::bf16);
  small_dims.dim_qk = small_dims.dim_v = 32;
  TestProblem b(small_dims);
  st = cuda::plan_decode(b.args(), &plan);
  EXPECT_EQ(st.code(), ErrorCode::unsupported) << st.message();
}

TEST(CudaDecode, RejectsInvalidArguments) {
  Spec s = fixed_spec(DType::bf16);
  TestProblem a(s);
  cuda::DecodePlan negative;
  const Status options_st = cuda::plan_decode(a.args(), &negative, {.splits_per_cta = -1});
  EXPECT_EQ(options_st.code(), ErrorCode::invalid_argument) << options_st.message();
  expect_invalid_arguments_rejected<cuda::DecodePlan>(a, cuda::plan_decode, cuda::run_decode);
}

}  // namespace
}  // namespace mxattn::test
