// The CUDA prefill engine against the f64 CPU reference on random problems of every feature it
// supports (outputs poisoned before each run, memory past kv_len poisoned with NaN and Inf);
// partials split by split against the reference run with the same partition; exact results of rows
// that see nothing; GQA bitwise equal to repeated K/V; block-sparse layouts (an all-present one
// bitwise equal to dense); determinism; CUDA graph replay; errors.
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
#include "cpu/test_problem.h"
#include "cuda/device_problem.h"
#include "cuda/prefill/schedule.h"
#include "mxattn/cuda_prefill.h"
#include "mxattn/mx.h"

namespace mxattn::test {
namespace {

// The type the kernel's tensor cores read: f16 for f16 inputs, else bf16 (MX inputs are
// dequantized into bf16).
DType kernel_input_type(const Spec& s) {
  return s.q_type == DType::f16 && s.k_type == DType::f16 && s.v_type == DType::f16 ? DType::f16
                                                                                    : DType::bf16;
}

// P is rounded to the kernel's input type before P V, as in flash attention; scores and sums stay
// f32.
Tolerance prefill_output_tolerance(DType input, DType output) {
  const double p_rounding = input == DType::bf16 ? 4e-3 : 1e-3;
  const double out_rounding = output == DType::bf16 ? 0x1p-7 : output == DType::f16 ? 0x1p-10 : 0.0;
  return {p_rounding, p_rounding + out_rounding};
}
Tolerance prefill_lse_tolerance() {
  return {5e-4, 5e-5};
}

// A random problem within what the prefill engine supports, Q/K/V stored as `type`.
Spec prefill_spec(uint64_t seed, DType type, int64_t max_seq, int64_t max_work) {
  Rng rng(seed);

  Spec s;

  s.partition = api::EngineKind::cuda_prefill;
  s.seed = seed;
  s.q_type = s.k_type = s.v_type = type;
  s.o_type = rng.pick(std::vector<DType>{DType::f32, DType::f16, DType::bf16});
  const int64_t dims = rng.uniform(0, 9);
  s.dim_qk = dims < 3 ? 64 : dims < 6 ? 128 : dims < 8 ? 256 : 192;
  s.dim_v = s.dim_qk == 192 ? 128 : s.dim_qk;
  s.batch = rng.uniform(1, 2);
  s.heads_kv = rng.uniform(1, 2);
  s.heads_q = s.heads_kv * rng.pick(std::vector<int64_t>{1, 2, 3, 4});
  s.seq_q = rng.chance(0.2) ? rng.uniform(1, 16) : rng.uniform(1, max_seq);
  s.seq_k = rng.chance(0.2) ? rng.uniform(1, 40) : rng.uniform(1, 2 * max_seq);
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
  draw_masks(rng, 0.6, -s.seq_q / 2, s);
  if (rng.chance(0.2)) s.scale = float(rng.real(0.05, 0.5));
  s.lse = rng.chance(0.85);
  const double r = rng.real(0, 1);
  s.split_kv = r < 0.5 ? 1 : r < 0.8 ? int32_t(rng.uniform(2, 5)) : 0;
  // The reference runs the engine's partition (Spec::partition), so that partials and counts
  // compare split by split; half the problems name the engine's tiles, the others leave them to it.
  if (rng.chance(0.5)) {
    const cuda::PrefillTiles tiles = cuda::prefill_tiles(s.dim_qk, s.dim_v);
    s.tile_m = int32_t(tiles.tile_m);
    s.tile_n = int32_t(tiles.tile_n);
  }
  s.early_exit = rng.chance(0.4);
  s.partials = rng.chance(0.4);
  s.counts = rng.chance(0.3);
  // Auto split: the engine's own target, or a small one given to both engines.
  if (s.split_kv == 0 && rng.chance(0.5)) {
    s.auto_target = int32_t(rng.uniform(1, 4));
  }
  s.strided = rng.chance(0.3);
  s.poison_padding = true;
  // A larger gain makes some softmaxes peaked, where the max subtraction matters.
  if (rng.chance(0.3)) s.q_gain = 3.0f;
  return s;
}

// A random block-sparse layout (spec §6) on top of a random prefill problem: every block size,
// layouts per batch entry and head or broadcast, densities from empty to full.
Spec sparse_spec(uint64_t seed, DType type, int64_t max_seq, int64_t max_work) {
  Spec s = prefill_spec(seed, type, max_seq, max_work);
  Rng rng(seed ^ 0x5bd1e995u);
  const int32_t blocks[] = {16, 32, 64, 128, 256};
  s.block_q = blocks[rng.uniform(0, 4)];
  s.block_k = blocks[rng.uniform(0, 4)];
  const int64_t density = rng.uniform(0, 9);
  s.sparse_density = density == 0 ? 0.0 : density == 1 ? 1.0 : double(rng.uniform(10, 90)) / 100;
  s.sparse_per_batch = rng.uniform(0, 1) == 1;
  s.sparse_per_head = rng.uniform(0, 1) == 1;
  return s;
}

const DType kTypes[] = {DType::bf16, DType::f16};
const DType kMxTypes[] = {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1};

// MX Q, K and V (spec §5), each of its own type or bf16, at least one MX, V scales along either
// axis, sometimes with K smoothing's k_mean, on a random dense or (with `sparse`) block-sparse
// problem.
Spec mx_spec(uint64_t seed, bool sparse, int64_t max_seq, int64_t max_work) {
  Spec s = sparse ? sparse_spec(seed, DType::bf16, max_seq, max_work)
                  : prefill_spec(seed, DType::bf16, max_seq, max_work);
  Rng rng(seed ^ 0x27d4eb2fu);
  DType* types[] = {&s.q_type, &s.k_type, &s.v_type};
  const int64_t forced = rng.uniform(0, 2);
  for (int64_t t = 0; t < 3; ++t) {
    if (t == forced || rng.uniform(0, 3) != 0) *types[t] = kMxTypes[rng.uniform(0, 4)];
  }
  s.v_axis = is_mx(s.v_type) && rng.uniform(0, 1) == 1 ? VScaleAxis::keys : VScaleAxis::head_dim;
  s.scale_mode = rng.uniform(0, 1) == 1 ? ScaleMode::rceil : ScaleMode::floor;
  s.k_mean = rng.uniform(0, 2) == 0;
  return s;
}

// A paged KV cache (spec §4) under a random problem (plain, MX or sparse): every page size, spare
// pages no block table entry names (poisoned), Sk rounded up to whole pages.
Spec paged_spec(uint64_t seed, int64_t max_seq, int64_t max_work) {
  Rng rng(seed ^ 0x165667b1u);
  const int64_t kind = rng.uniform(0, 3);
  Spec s = kind == 0   ? mx_spec(seed, false, max_seq, max_work)
           : kind == 1 ? sparse_spec(seed, kTypes[rng.uniform(0, 1)], max_seq, max_work)
                       : prefill_spec(seed, kTypes[rng.uniform(0, 1)], max_seq, max_work);
  const int64_t sizes[] = {16, 32, 64, 128, 256};
  s.page_size = sizes[rng.uniform(s.v_axis == VScaleAxis::keys ? 1 : 0, 4)];
  s.seq_k = (s.seq_k + s.page_size - 1) / s.page_size * s.page_size;
  s.spare_pages = rng.uniform(0, 3);
  return s;
}

// Whether the bulk tensor copy engine can read a view: head dim contiguous, other strides of
// 16-byte multiples (strided specs pad rows by a few elements, which it cannot). MX views and
// paged caches reach it through the engine's dense copy, whatever their strides.
bool copy_engine_can_read(const TensorView& v, bool copied) {
  if (copied || is_mx(v.dtype)) return true;
  if (v.stride[3] != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (v.shape[i] > 1 && (v.stride[i] * bits_of(v.dtype) / 8) % 16 != 0) return false;
  return true;
}

// Plans on `dev`'s arguments, poisons the outputs, runs and copies the outputs into `host`.
Status run_cuda(TestProblem& host, DeviceProblem& dev) {
  cuda::PrefillPlan plan;
  if (Status st = cuda::plan_prefill(dev.args(), &plan); !st) return st;
  return run_and_download(host, dev, [&] { return cuda::run_prefill(plan, dev.args(), nullptr); });
}

// O, LSE and counts against the reference; with partials, every split the partition writes,
// split by split.
void expect_matches(const TestProblem& ref, const Outputs& want, const Outputs& got) {
  const Spec& s = ref.spec();
  EXPECT_TRUE(
      values_close(want.o, got.o, prefill_output_tolerance(kernel_input_type(s), s.o_type), "O"));
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
  expect_partials_match(ref, p, api::split_params(p, s.partition), want, got,
                        prefill_output_tolerance(kernel_input_type(s), DType::f32),
                        prefill_lse_tolerance());
}

// One random problem: the reference on one copy, the CUDA engine on another.
void check_random_problem(const Spec& spec) {
  SCOPED_TRACE(spec.describe());
  TestProblem ref(spec);
  TestProblem got(spec);
  DeviceProblem dev(got);
  const Status st = run_cuda(got, dev);
  const AttentionArgs& a = got.args();
  const bool paged = spec.paged();
  if (!copy_engine_can_read(a.q, false) || !copy_engine_can_read(a.k, paged) ||
      !copy_engine_can_read(a.v, paged)) {
    EXPECT_EQ(st.code(), ErrorCode::unsupported) << st.message();
    return;
  }
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
  expect_matches(ref, ref.outputs(), got.outputs());
}

// Runs both problems on the device and expects O and LSE equal bit for bit.
void expect_bitwise_same_outputs(TestProblem& a, TestProblem& b) {
  DeviceProblem dev_a(a), dev_b(b);
  const Status st_a = run_cuda(a, dev_a);
  ASSERT_TRUE(st_a.is_ok()) << st_a.message();
  const Status st_b = run_cuda(b, dev_b);
  ASSERT_TRUE(st_b.is_ok()) << st_b.message();
  const Outputs oa = a.outputs(), ob = b.outputs();
  EXPECT_TRUE(values_bitwise_equal(oa.o, ob.o, "O"));
  EXPECT_TRUE(values_bitwise_equal(oa.lse, ob.lse, "LSE"));
}

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

class CudaPrefillSparseRandom : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPrefillSparseRandom, MatchesReference) {
  for (uint64_t n = 0; n < 16; ++n) {
    check_random_problem(
        sparse_spec(5000 + 2000 * uint64_t(GetParam()) + n, GetParam(), 500, 40'000'000));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaPrefillSparseRandom, ::testing::ValuesIn(kTypes), type_name);

// Small sparse problems, for compute-sanitizer's memcheck and racecheck.
TEST(CudaPrefillFeaturesSanitized, SparseMatchesReference) {
  for (uint64_t n = 0; n < 4; ++n) {
    const DType type = kTypes[n % 2];
    check_random_problem(sparse_spec(91 + n, type, 200, 2'000'000));
  }
}

Spec fixed_spec() {
  Spec s;
  s.partition = api::EngineKind::cuda_prefill;
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

// MX inputs, dense and sparse: every scale view is allocated at exactly its logical size (see
// DeviceProblem), so a read past a scale buffer's end is an error under compute-sanitizer.
TEST(CudaPrefillMx, RandomProblemsMatchReference) {
  for (uint64_t n = 0; n < 24; ++n) {
    check_random_problem(mx_spec(9000 + n, n % 3 == 2, 400, 30'000'000));
  }
}

// Every MX type as Q, K and V in turn, with V's scales along the head dim and along the keys.
TEST(CudaPrefillMx, EveryTypeAndScaleAxisMatchesReference) {
  uint64_t seed = 700;
  for (const DType type : kMxTypes) {
    for (int tensor = 0; tensor < 3; ++tensor) {
      for (const VScaleAxis axis : {VScaleAxis::head_dim, VScaleAxis::keys}) {
        if (tensor != 2 && axis == VScaleAxis::keys) continue;
        Spec s = fixed_spec();
        s.seed = seed++;
        s.seq_q = 150;
        s.seq_k = 290;
        s.kv_len = {290, 201};
        s.causal = Causal::bottom_right;
        s.lse = true;
        DType* types[] = {&s.q_type, &s.k_type, &s.v_type};
        *types[tensor] = type;
        s.v_axis = axis;
        check_random_problem(s);
      }
    }
  }
}

// MX Q is dequantized on chip (q_codes.cuh) into the bits of its exact bf16 values: the same
// problem with Q given as those bf16 values gives the same O and LSE bit for bit, for every MX type
// and head-dim pair (a partial last query tile, kv_len, GQA, causal, K through its dense copy).
TEST(CudaPrefillMx, QCodesGiveTheirBf16ValuesBitwise) {
  const int64_t dims[][2] = {{64, 64}, {128, 128}, {256, 256}, {192, 128}};
  for (const DType type : kMxTypes) {
    for (const auto& dim : dims) {
      Spec s = fixed_spec();
      s.seed = 40 + uint64_t(type);
      s.dim_qk = dim[0];
      s.dim_v = dim[1];
      s.tile_m = int32_t(cuda::prefill_tiles(dim[0], dim[1]).tile_m);
      s.tile_n = int32_t(cuda::prefill_tiles(dim[0], dim[1]).tile_n);
      s.q_type = type;
      s.k_type = DType::e4m3;
      s.causal = Causal::bottom_right;
      s.lse = true;
      SCOPED_TRACE(s.describe());
      TestProblem codes(s);
      const AttentionArgs& a = codes.args();
      std::vector<float> q(size_t(s.batch * s.seq_q * s.heads_q * s.dim_qk));
      const TensorView values =
          make_view(q.data(), DType::f32, {s.batch, s.seq_q, s.heads_q, s.dim_qk});
      ASSERT_TRUE(dequantize(a.q, a.q_scales, 3, values).is_ok());
      Spec plain = s;
      plain.q_type = DType::bf16;
      ProblemData data = codes.data();
      data.q = q;
      TestProblem bf16(plain, data);
      expect_bitwise_same_outputs(codes, bf16);
    }
  }
}

// K smoothing: given k_mean, the LSE is the true one (the reference's), with split-KV and without.
TEST(CudaPrefillMx, KMeanShiftsTheLse) {
  for (const int32_t splits : {1, 3}) {
    Spec s = fixed_spec();
    s.k_type = DType::e4m3;
    s.k_mean = true;
    s.lse = true;
    s.split_kv = splits;
    s.causal = Causal::top_left;
    check_random_problem(s);
  }
}

// Small MX problems, dense and sparse, for compute-sanitizer's memcheck and racecheck.
TEST(CudaPrefillFeaturesSanitized, MxMatchesReference) {
  for (uint64_t n = 0; n < 4; ++n)
    check_random_problem(mx_spec(130 + n, n % 2 == 1, 200, 2'000'000));
}

TEST(CudaPrefillPaged, RandomProblemsMatchReference) {
  for (uint64_t n = 0; n < 24; ++n) check_random_problem(paged_spec(11000 + n, 400, 30'000'000));
}

// Chunked prefill: a chunk of new query rows against a long paged cache, bottom-right causal, for
// every page size; and the same problem with a dense cache gives the same result bit for bit.
TEST(CudaPrefillPaged, ChunkAgainstCacheMatchesReferenceAndDense) {
  for (const int64_t page_size : {16, 64, 128, 256}) {
    Spec dense = fixed_spec();
    dense.seed = 40 + uint64_t(page_size);
    dense.seq_q = 190;
    dense.seq_k = 1024;
    dense.kv_len = {1024, 777};
    dense.causal = Causal::bottom_right;
    dense.lse = true;
    dense.split_kv = page_size == 64 ? 3 : 1;
    Spec paged = dense;
    paged.page_size = page_size;
    paged.spare_pages = 2;
    SCOPED_TRACE(paged.describe());
    check_random_problem(paged);
    const ProblemData data = generate_data(paged);
    TestProblem a(dense, data), b(paged, data);
    expect_bitwise_same_outputs(a, b);
  }
}

// Small paged problems, for compute-sanitizer's memcheck and racecheck.
TEST(CudaPrefillFeaturesSanitized, PagedMatchesReference) {
  for (uint64_t n = 0; n < 4; ++n) check_random_problem(paged_spec(170 + n, 200, 2'000'000));
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

// Runs `s` (with partials) and checks the rows that see no key: O exactly +0 and LSE exactly -inf,
// in the output and in every partial.
void check_rows_that_see_nothing(const Spec& s) {
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

// Rows that see no key (kv_len 0, causal rows before the diagonal, the window).
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
  check_rows_that_see_nothing(s);
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
  expect_bitwise_same_outputs(a, b);
}

// A 16-bit O whose rows are whole aligned 16-byte chunks goes out through shared memory; one with
// padded rows from registers: both store the same bits, at every head-dim pair and both types
// (MX inputs, whose dense copy lets the padded layout run at all).
TEST(CudaPrefill, StagedAndDirectStoresAgreeBitwise) {
  for (const DType out : {DType::bf16, DType::f16}) {
    for (const int64_t dim_qk : {64, 128, 192, 256}) {
      Spec s = fixed_spec();
      s.q_type = s.k_type = s.v_type = DType::e4m3;
      s.o_type = out;
      s.dim_qk = dim_qk;
      s.dim_v = dim_qk == 192 ? 128 : dim_qk;
      s.tile_m = int32_t(cuda::prefill_tiles(s.dim_qk, s.dim_v).tile_m);
      s.tile_n = int32_t(cuda::prefill_tiles(s.dim_qk, s.dim_v).tile_n);
      s.causal = Causal::bottom_right;
      s.lse = true;
      SCOPED_TRACE(s.describe());
      const ProblemData data = generate_data(s);
      Spec padded = s;
      padded.strided = true;
      TestProblem staged(s, data), direct(padded, data);
      expect_bitwise_same_outputs(staged, direct);
      // And both against the reference (the staged store rounds with the hardware conversion).
      TestProblem ref(s, data);
      ASSERT_TRUE(ref.run(Engine::cpu_reference).is_ok());
      expect_matches(ref, ref.outputs(), staged.outputs());
    }
  }
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
  expect_graph_replays(
      dev, [&](cudaStream_t stream) { return cuda::run_prefill(plan, dev.args(), stream); },
      {&first, &second}, got,
      [&](TestProblem& problem) { expect_matches(problem, problem.outputs(), got.outputs()); });
}

// A layout listing every key block gives the dense result bit for bit, for block sizes below, at
// and above the key tile.
TEST(CudaPrefillSparse, AllPresentEqualsDenseBitwise) {
  for (const int64_t dim : {64, 128, 256}) {
    for (const int32_t block : {16, 64, 128, 256}) {
      Spec dense = fixed_spec();
      dense.dim_qk = dense.dim_v = dim;
      dense.tile_m = int32_t(cuda::prefill_tiles(dim, dim).tile_m);
      dense.tile_n = int32_t(cuda::prefill_tiles(dim, dim).tile_n);
      dense.causal = block == 64 ? Causal::bottom_right : Causal::none;
      dense.lse = true;
      Spec sparse = dense;
      sparse.block_q = block;
      sparse.block_k = block == 16 ? 256 : block;
      sparse.sparse_density = 1.0;
      sparse.sparse_per_head = block == 128;
      SCOPED_TRACE(sparse.describe());
      const ProblemData data = generate_data(sparse);
      TestProblem a(dense, data), b(sparse, data);
      expect_bitwise_same_outputs(a, b);
    }
  }
}

// Sparse layouts under every causal alignment and a window, with GQA, split-KV and partials, for
// each head dim: the masks apply on top of the layout.
TEST(CudaPrefillSparse, MasksAndGqaOnTopMatchReference) {
  const Causal alignments[] = {Causal::top_left, Causal::bottom_right, Causal::prefix};
  int64_t n = 0;
  for (const int64_t dim : {64, 128, 256}) {
    for (const Causal causal : alignments) {
      Spec s = fixed_spec();
      s.seed = 300 + uint64_t(n++);
      s.dim_qk = s.dim_v = dim;
      s.tile_m = int32_t(cuda::prefill_tiles(dim, dim).tile_m);
      s.tile_n = int32_t(cuda::prefill_tiles(dim, dim).tile_n);
      s.causal = causal;
      if (causal == Causal::prefix) s.prefix_offset = {40, 250};
      if (causal == Causal::top_left) s.window = 150;
      s.heads_kv = 2;
      s.heads_q = 6;
      s.block_q = causal == Causal::prefix ? 32 : 64;
      s.block_k = causal == Causal::bottom_right ? 32 : 128;
      s.sparse_density = 0.4;
      s.split_kv = 2;
      s.partials = true;
      s.counts = true;
      check_random_problem(s);
    }
  }
}

// Query blocks that list no key block, whatever the rest of the CTA's query tile sees.
TEST(CudaPrefillSparse, EmptyRowsAreExactlyZero) {
  for (const double density : {0.0, 0.2}) {
    Spec s = fixed_spec();
    s.block_q = 16;
    s.block_k = 16;
    s.sparse_density = density;
    s.split_kv = 3;
    s.partials = true;
    s.lse = true;
    check_rows_that_see_nothing(s);
  }
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
  Spec mx_with_f16 = fixed_spec();
  mx_with_f16.q_type = mx_with_f16.v_type = DType::f16;
  mx_with_f16.k_type = DType::e4m3;
  refused(mx_with_f16);
  Spec small_dims = fixed_spec();
  small_dims.dim_qk = small_dims.dim_v = 32;
  small_dims.tile_m = small_dims.tile_n = 0;
  refused(small_dims);
  Spec tiles = fixed_spec();
  tiles.tile_n = 64;
  refused(tiles);
}

TEST(CudaPrefill, RejectsInvalidArguments) {
  Spec s = fixed_spec();
  TestProblem a(s);
  expect_invalid_arguments_rejected<cuda::PrefillPlan>(a, cuda::plan_prefill, cuda::run_prefill);
}

}  // namespace
}  // namespace mxattn::test
