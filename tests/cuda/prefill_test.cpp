// The CUDA prefill engine against the f64 CPU reference on random problems of every feature it
// supports (outputs poisoned before each run, memory past kv_len poisoned with NaN and Inf);
// partials split by split against the reference run with the same partition; exact results of rows
// that see nothing; GQA bitwise equal to repeated K/V; determinism; CUDA graph replay; errors.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/problem.h"
#include "cpu/compare.h"
#include "cpu/problem_gen.h"
#include "cuda/device_problem.h"
#include "mxattn/cuda_prefill.h"

namespace mxattn::test {
namespace {

// P is rounded to the input type before P V, as in flash attention; scores and sums stay f32.
Tolerance prefill_output_tolerance(DType input, DType output) {
  const double p_rounding = input == DType::bf16 ? 4e-3 : 1e-3;
  const double out_rounding = output == DType::bf16 ? 0x1p-7 : output == DType::f16 ? 0x1p-10 : 0.0;
  return {p_rounding, p_rounding + out_rounding};
}
Tolerance prefill_lse_tolerance() {
  return {5e-4, 5e-5};
}

int64_t work_of(const Spec& s) {
  return s.batch * s.heads_q * s.seq_q * s.seq_k * (s.dim_qk + s.dim_v);
}

// A random problem within what the prefill engine supports, Q/K/V stored as `type`.
Spec prefill_spec(uint64_t seed, DType type, int64_t max_seq, int64_t max_work) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const auto chance = [&](double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng) < p;
  };
  const auto pick = [&](const auto& options) {
    return options[size_t(uniform(0, int64_t(options.size()) - 1))];
  };

  Spec s;
  s.seed = seed;
  s.q_type = s.k_type = s.v_type = type;
  s.o_type = pick(std::vector<DType>{DType::f32, DType::f16, DType::bf16});
  const int64_t dims = uniform(0, 9);
  s.dim_qk = dims < 3 ? 64 : dims < 6 ? 128 : dims < 8 ? 256 : 192;
  s.dim_v = s.dim_qk == 192 ? 128 : s.dim_qk;
  s.batch = uniform(1, 2);
  s.heads_kv = uniform(1, 2);
  s.heads_q = s.heads_kv * pick(std::vector<int64_t>{1, 2, 3, 4});
  s.seq_q = chance(0.2) ? uniform(1, 16) : uniform(1, max_seq);
  s.seq_k = chance(0.2) ? uniform(1, 40) : uniform(1, 2 * max_seq);
  while (work_of(s) > max_work) {
    if (s.heads_q > s.heads_kv) {
      s.heads_q -= s.heads_kv;
    } else if (s.batch > 1) {
      --s.batch;
    } else if (s.seq_q > 8) {
      s.seq_q /= 2;
    } else {
      s.seq_k /= 2;
    }
  }
  if (chance(0.6)) {
    for (int64_t b = 0; b < s.batch; ++b) {
      const double r = std::uniform_real_distribution<double>(0, 1)(rng);
      s.kv_len.push_back(int32_t(r < 0.1 ? 0 : r < 0.3 ? s.seq_k : uniform(0, s.seq_k)));
    }
  }
  s.causal = pick(
      std::vector<Causal>{Causal::none, Causal::top_left, Causal::bottom_right, Causal::prefix});
  if (s.causal == Causal::prefix) {
    for (int64_t b = 0; b < s.batch; ++b)
      s.prefix_offset.push_back(int32_t(uniform(-s.seq_q / 2, s.seq_k)));
  }
  if (chance(0.3)) s.window = uniform(0, s.seq_k);
  if (chance(0.2)) s.scale = float(std::uniform_real_distribution<double>(0.05, 0.5)(rng));
  s.lse = chance(0.85);
  const double r = std::uniform_real_distribution<double>(0, 1)(rng);
  s.split_kv = r < 0.5 ? 1 : r < 0.8 ? int32_t(uniform(2, 5)) : 0;
  // The reference runs the engine's partition, so that partials and counts compare split by split.
  const cuda::PrefillTiles tiles = cuda::prefill_tiles(s.dim_qk, s.dim_v);
  s.tile_m = int32_t(tiles.tile_m);
  s.tile_n = int32_t(tiles.tile_n);
  s.early_exit = chance(0.4);
  s.partials = chance(0.4);
  s.counts = chance(0.3);
  s.strided = chance(0.3);
  s.poison_padding = true;
  return s;
}

::testing::AssertionResult cuda_ok(cudaError_t e) {
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << cudaGetErrorString(e);
}

// Whether the bulk tensor copy engine can read a view: head dim contiguous, other strides of
// 16-byte multiples (strided specs pad rows by a few elements, which it cannot).
bool copy_engine_can_read(const TensorView& v) {
  if (v.stride[3] != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (v.shape[i] > 1 && (v.stride[i] * bits_of(v.dtype) / 8) % 16 != 0) return false;
  return true;
}

// Plans on `dev`'s arguments, poisons the outputs, runs and copies the outputs into `host`.
Status run_cuda(TestProblem& host, DeviceProblem& dev) {
  cuda::PrefillPlan plan;
  if (Status st = cuda::plan_prefill(dev.args(), &plan); !st) return st;
  dev.poison_outputs();
  if (Status st = cuda::run_prefill(plan, dev.args(), nullptr); !st) return st;
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return Status::runtime(cudaGetErrorString(e));
  }
  dev.download_outputs(host);
  return Status::ok();
}

int64_t partial_o_index(const Spec& s, int64_t sl, int64_t b, int64_t i, int64_t h, int64_t d) {
  return (((sl * s.batch + b) * s.seq_q + i) * s.heads_q + h) * s.dim_v + d;
}
int64_t partial_lse_index(const Spec& s, int64_t sl, int64_t b, int64_t h, int64_t i) {
  return ((sl * s.batch + b) * s.heads_q + h) * s.seq_q + i;
}

// O, LSE and counts against the reference; with partials, every split the partition writes,
// split by split.
void expect_matches(const TestProblem& ref, const Outputs& want, const Outputs& got) {
  const Spec& s = ref.spec();
  EXPECT_TRUE(values_close(want.o, got.o, prefill_output_tolerance(s.q_type, s.o_type), "O"));
  if (s.lse) {
    EXPECT_TRUE(values_close(want.lse, got.lse, prefill_lse_tolerance(), "LSE"));
  }
  if (s.counts) {
    EXPECT_EQ(want.counts, got.counts);
  }
  EXPECT_TRUE(empty_rows_exact(ref, got));
  if (!s.partials) return;
  core::Problem p;
  ASSERT_TRUE(core::validate_problem(ref.args(), &p).is_ok());
  const core::SplitParams split = core::resolve_split(p, s.tile_m, s.tile_n);
  std::vector<float> want_o, got_o, want_l, got_l;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const core::QueryTile tile = core::query_tile(p, split, b, h, i / split.tile_m);
        const int64_t written = s.early_exit ? tile.count : tile.splits;
        for (int64_t sl = 0; sl < written; ++sl) {
          const int64_t l = partial_lse_index(s, sl, b, h, i);
          want_l.push_back(want.partial_lse[size_t(l)]);
          got_l.push_back(got.partial_lse[size_t(l)]);
          for (int64_t d = 0; d < s.dim_v; ++d) {
            const int64_t o = partial_o_index(s, sl, b, i, h, d);
            want_o.push_back(want.partial_o[size_t(o)]);
            got_o.push_back(got.partial_o[size_t(o)]);
          }
        }
      }
  EXPECT_TRUE(
      values_close(want_o, got_o, prefill_output_tolerance(s.q_type, DType::f32), "partial O"));
  EXPECT_TRUE(values_close(want_l, got_l, prefill_lse_tolerance(), "partial LSE"));
}

// One random problem: the reference on one copy, the CUDA engine on another.
void check_random_problem(const Spec& spec) {
  SCOPED_TRACE(spec.describe());
  TestProblem ref(spec);
  TestProblem got(spec);
  DeviceProblem dev(got);
  const Status st = run_cuda(got, dev);
  const AttentionArgs& a = got.args();
  if (!copy_engine_can_read(a.q) || !copy_engine_can_read(a.k) || !copy_engine_can_read(a.v)) {
    EXPECT_EQ(st.code(), ErrorCode::unsupported) << st.message();
    return;
  }
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
  expect_matches(ref, ref.outputs(), got.outputs());
}

const DType kTypes[] = {DType::bf16, DType::f16};

std::string type_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(name_of(info.param));
}

class CudaPrefillRandom : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPrefillRandom, MatchesReference) {
  for (uint64_t n = 0; n < 20; ++n) {
    check_random_problem(
        prefill_spec(2000 * uint64_t(GetParam()) + n, GetParam(), 400, 40'000'000));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaPrefillRandom, ::testing::ValuesIn(kTypes), type_name);

// Small problems, for compute-sanitizer's memcheck and racecheck.
class CudaPrefillSanitized : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPrefillSanitized, MatchesReference) {
  for (uint64_t n = 0; n < 3; ++n) {
    check_random_problem(
        prefill_spec(77 + 2000 * uint64_t(GetParam()) + n, GetParam(), 160, 2'000'000));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaPrefillSanitized, ::testing::ValuesIn(kTypes), type_name);

Spec fixed_spec() {
  Spec s;
  s.seed = 11;
  s.q_type = s.k_type = s.v_type = DType::bf16;
  s.o_type = DType::f32;
  s.dim_qk = s.dim_v = 128;
  s.batch = 2;
  s.heads_kv = 2;
  s.heads_q = 6;
  s.seq_q = 300;
  s.seq_k = 520;
  s.kv_len = {520, 333};
  s.tile_m = int32_t(cuda::prefill_tiles(128, 128).tile_m);
  s.tile_n = int32_t(cuda::prefill_tiles(128, 128).tile_n);
  s.poison_padding = true;
  return s;
}

// Long sequences, causal, several query and key tiles per head: the pipelines turn over many times.
TEST(CudaPrefill, LongCausalMatchesReference) {
  for (const int64_t dim : {64, 128, 256}) {
    Spec s = fixed_spec();
    s.dim_qk = s.dim_v = dim;
    s.tile_m = int32_t(cuda::prefill_tiles(dim, dim).tile_m);
    s.tile_n = int32_t(cuda::prefill_tiles(dim, dim).tile_n);
    s.batch = 1;
    s.heads_q = 4;
    s.seq_q = s.seq_k = 1100;
    s.kv_len = {1037};
    s.causal = Causal::bottom_right;
    check_random_problem(s);
  }
}

// Rows that see no key: O exactly +0 and LSE exactly -inf, in the output and in every partial.
TEST(CudaPrefill, RowsThatSeeNothingAreExactlyZero) {
  Spec s = fixed_spec();
  s.seq_q = 200;
  s.seq_k = 256;
  s.kv_len = {0, 90};
  s.causal = Causal::bottom_right;  // off = kv_len - 200: rows below 200 - kv_len see nothing
  s.window = 5;
  s.split_kv = 3;
  s.partials = true;
  s.lse = true;
  SCOPED_TRACE(s.describe());
  TestProblem got(s);
  DeviceProblem dev(got);
  const Status st = run_cuda(got, dev);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Outputs out = got.outputs();
  int64_t empty_rows = 0;
  EXPECT_TRUE(empty_rows_exact(got, out, &empty_rows));
  EXPECT_GT(empty_rows, 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        if (!got.row_sees_nothing(b, h, i)) continue;
        for (int64_t d = 0; d < s.dim_v; ++d) {
          const float x = out.o[size_t(((b * s.seq_q + i) * s.heads_q + h) * s.dim_v + d)];
          ASSERT_TRUE(x == 0.0f && !std::signbit(x)) << "b " << b << " h " << h << " i " << i;
        }
        for (int64_t sl = 0; sl < s.split_kv; ++sl) {
          ASSERT_EQ(out.partial_lse[size_t(partial_lse_index(s, sl, b, h, i))], -INFINITY);
          ASSERT_EQ(out.partial_o[size_t(partial_o_index(s, sl, b, i, h, 0))], 0.0f);
        }
      }
}

// Query head h reads KV head h / g: the result equals that of K and V repeated g times, bit for
// bit.
TEST(CudaPrefill, GqaEqualsRepeatedKvBitwise) {
  Spec grouped = fixed_spec();
  grouped.causal = Causal::top_left;
  grouped.lse = true;
  const ProblemData data = generate_data(grouped);
  Spec repeated = grouped;
  repeated.heads_kv = grouped.heads_q;
  ProblemData rep = data;
  const int64_t g = grouped.heads_q / grouped.heads_kv;
  const auto repeat = [&](const std::vector<float>& x, int64_t dim) {
    std::vector<float> out;
    const int64_t rows = grouped.batch * grouped.seq_k;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < repeated.heads_kv; ++h) {
        const auto row = x.begin() + (r * grouped.heads_kv + h / g) * dim;
        out.insert(out.end(), row, row + dim);
      }
    return out;
  };
  rep.k = repeat(data.k, grouped.dim_qk);
  rep.v = repeat(data.v, grouped.dim_v);
  TestProblem a(grouped, data), b(repeated, rep);
  DeviceProblem dev_a(a), dev_b(b);
  ASSERT_TRUE(run_cuda(a, dev_a).is_ok());
  ASSERT_TRUE(run_cuda(b, dev_b).is_ok());
  const Outputs oa = a.outputs(), ob = b.outputs();
  EXPECT_TRUE(values_bitwise_equal(oa.o, ob.o, "O"));
  EXPECT_TRUE(values_bitwise_equal(oa.lse, ob.lse, "LSE"));
}

// Two runs agree bit for bit, with and without split-KV.
TEST(CudaPrefill, RunsAreDeterministic) {
  for (const int32_t splits : {1, 3}) {
    Spec s = fixed_spec();
    s.split_kv = splits;
    s.o_type = DType::bf16;
    TestProblem got(s);
    DeviceProblem dev(got);
    ASSERT_TRUE(run_cuda(got, dev).is_ok());
    const Outputs first = got.outputs();
    ASSERT_TRUE(run_cuda(got, dev).is_ok());
    EXPECT_TRUE(values_bitwise_equal(first.o, got.outputs().o, "O of a second run"));
  }
}

// A captured run replays correctly with new contents in the same buffers.
TEST(CudaPrefill, GraphReplayComputesNewInputs) {
  Spec s = fixed_spec();
  s.split_kv = 2;
  s.causal = Causal::prefix;
  s.prefix_offset = {100, 17};
  SCOPED_TRACE(s.describe());
  TestProblem first(s);
  Spec s2 = s;
  s2.seed = s.seed + 1;
  TestProblem second(s2);
  TestProblem got(s);
  DeviceProblem dev(got);
  cuda::PrefillPlan plan;
  const Status planned = cuda::plan_prefill(dev.args(), &plan);
  ASSERT_TRUE(planned.is_ok()) << planned.message();
  ASSERT_TRUE(plan.combines());

  cudaStream_t stream;
  ASSERT_TRUE(cuda_ok(cudaStreamCreate(&stream)));
  cudaGraph_t graph;
  ASSERT_TRUE(cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal)));
  const Status captured = cuda::run_prefill(plan, dev.args(), stream);
  ASSERT_TRUE(cuda_ok(cudaStreamEndCapture(stream, &graph)));
  ASSERT_TRUE(captured.is_ok()) << captured.message();
  cudaGraphExec_t exec;
  ASSERT_TRUE(cuda_ok(cudaGraphInstantiate(&exec, graph, 0)));
  for (TestProblem* problem : {&first, &second}) {
    ASSERT_TRUE(problem->run(Engine::cpu_reference).is_ok());
    dev.upload_inputs(*problem);
    dev.poison_outputs();
    ASSERT_TRUE(cuda_ok(cudaGraphLaunch(exec, stream)));
    ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(stream)));
    dev.download_outputs(got);
    expect_matches(*problem, problem->outputs(), got.outputs());
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(CudaPrefill, RefusesWhatItDoesNotSupport) {
  const auto refused = [](Spec s) {
    TestProblem problem(s);
    cuda::PrefillPlan plan;
    const Status st = cuda::plan_prefill(problem.args(), &plan);
    EXPECT_EQ(st.code(), ErrorCode::unsupported) << s.describe() << ": " << st.message();
    EXPECT_FALSE(plan.ready());
  };
  Spec mixed = fixed_spec();
  mixed.v_type = DType::f16;
  refused(mixed);
  Spec mx = fixed_spec();
  mx.k_type = DType::e4m3;
  refused(mx);
  Spec small_dims = fixed_spec();
  small_dims.dim_qk = small_dims.dim_v = 32;
  small_dims.tile_m = small_dims.tile_n = 0;
  refused(small_dims);
  Spec paged = fixed_spec();
  paged.page_size = 64;
  paged.seq_k = 512;
  paged.kv_len = {};
  refused(paged);
  Spec sparse = fixed_spec();
  sparse.block_q = sparse.block_k = 64;
  refused(sparse);
  Spec tiles = fixed_spec();
  tiles.tile_n = 64;
  refused(tiles);
}

TEST(CudaPrefill, RejectsInvalidArguments) {
  Spec s = fixed_spec();
  TestProblem a(s);
  AttentionArgs args = a.args();
  args.v.shape[3] = 64;  // V's head dim no longer matches O's
  cuda::PrefillPlan plan;
  Status st = cuda::plan_prefill(args, &plan);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();

  DeviceProblem dev(a);
  ASSERT_TRUE(cuda::plan_prefill(dev.args(), &plan).is_ok());
  AttentionArgs other = dev.args();
  other.o.stride[2] += 1;
  st = cuda::run_prefill(plan, other, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();
  st = cuda::run_prefill(cuda::PrefillPlan(), dev.args(), nullptr);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();
}

}  // namespace
}  // namespace mxattn::test
