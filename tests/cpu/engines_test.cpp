// The fast engine against the reference on random problems of every feature, with every kernel set
// of this CPU: O and LSE within a tolerance set by the output dtype, exact counts, exact results
// for rows that see nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <pmmintrin.h>  // _MM_DENORMALS_ZERO_ON
#include <xmmintrin.h>
#endif

#include "cpu/compare.h"
#include "cpu/runners.h"
#include "cpu/test_problem.h"

namespace mxattn::test {
namespace {

constexpr uint64_t kConfigs = 200;
constexpr uint64_t kBf16Configs = 100;

// Every kernel set on `p` against the reference's outputs `want`: exact empty rows, the rest within
// the output type's tolerance.
void expect_every_kernel_set_matches(TestProblem& p, const Outputs& want,
                                     cpu::RowTiles row_tiles = cpu::RowTiles::bf16) {
  for (const CpuRunner& runner : fast_runners()) {
    SCOPED_TRACE(runner.name());
    ASSERT_TRUE(runner.run(p, 0, row_tiles).is_ok());
    const Outputs got = p.outputs();
    ASSERT_TRUE(empty_rows_exact(p, got));
    ASSERT_TRUE(outputs_close(p, want, got));
  }
}

// One reference run per problem, checked against every kernel set.
TEST(FastEngine, MatchesReferenceOnRandomProblems) {
  int64_t empty_rows = 0;
  for (uint64_t seed = 1; seed <= kConfigs; ++seed) {
    const Spec spec = random_spec(seed);
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
    ASSERT_TRUE(empty_rows_exact(p, want, &empty_rows));
    ASSERT_NO_FATAL_FAILURE(expect_every_kernel_set_matches(p, want));
  }
  // The sample must hold masked rows, or the exactness check above proves nothing.
  EXPECT_GT(empty_rows, 0);
}

// Q, K and V all bf16, with many rows per tile: the AMX kernels' single-part problems (bf16 as
// it is), on every kernel set.
TEST(FastEngine, MatchesReferenceOnBf16Problems) {
  SpecRange range;
  range.bf16_inputs = true;
  range.max_seq_q = 120;
  range.max_seq_k = 200;
  for (uint64_t seed = 1; seed <= kBf16Configs; ++seed) {
    Spec spec = random_spec(seed, range);
    // The AMX kernels take |scale| and negate Q for a negative one.
    if (seed % 5 == 0) spec.scale = -spec.scale.value_or(0.2f);
    if (seed % 10 == 1) spec.scale = 0.0f;
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
    ASSERT_NO_FATAL_FAILURE(expect_every_kernel_set_matches(p, want));
  }
}

// Decode (one query row) with bf16 queries and K and V as bf16, E4M3 or E5M2, with head dims past
// the 32 and 64 of the random problems: the scores of the sets with bf16 dot products read keys
// 128 elements at a time, whole and in parts.
TEST(FastEngine, MatchesReferenceOnBf16QueryDecode) {
  constexpr DType kKvTypes[] = {DType::bf16, DType::e4m3, DType::e5m2};
  constexpr int64_t kDims[] = {96, 128, 160, 256};
  SpecRange range;
  range.sparse = false;
  range.max_seq_k = 300;
  for (uint64_t seed = 1; seed <= 48; ++seed) {
    Spec spec = random_spec(seed, range);
    spec.seq_q = 1;
    spec.q_type = DType::bf16;
    spec.k_type = kKvTypes[seed % 3];
    spec.v_type = kKvTypes[seed / 3 % 3];
    spec.v_axis = VScaleAxis::head_dim;
    spec.dim_qk = kDims[seed % 4];
    spec.dim_v = kDims[seed / 4 % 4];
    if (seed % 5 == 0) spec.scale = -spec.scale.value_or(0.2f);
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
    ASSERT_NO_FATAL_FAILURE(expect_every_kernel_set_matches(p, want));
  }
}

// The largest |got - want| of finite values over the largest |want|.
double relative_error(const std::vector<float>& want, const std::vector<float>& got) {
  double err = 0, largest = 0;
  for (size_t n = 0; n < want.size(); ++n) {
    if (!std::isfinite(want[n])) continue;
    largest = std::fmax(largest, std::fabs(double(want[n])));
    err = std::fmax(err, std::fabs(double(got[n]) - double(want[n])));
  }
  return largest > 0 ? err / largest : err;
}

// Few query rows a tile (decode and a few tokens) through the AMX set's few-row tile kernel
// (amx_rows.h) in each of its modes (cpu::RowTiles: bf16 rows, bf16 and FP8, none), and through the
// FMA kernels: K and V bf16, E4M3 or E5M2 (MX blocks along the head dim); Q bf16, f16, f32 or E4M3
// (the kernel's Q in 1, 2 or 3 bf16 parts); groups of up to 12 query heads and up to 4 query rows,
// so that a tile's rows go through the kernel in several blocks; head dims that are not multiples
// of 32 (the rows are then copied) and paged caches (rows unevenly spaced across pages); the random
// problems' masks, splits and layouts.
TEST(FastEngine, RowTilesMatchReference) {
  constexpr DType kKvTypes[] = {DType::bf16, DType::e4m3, DType::e5m2};
  constexpr DType kQTypes[] = {DType::bf16, DType::f32, DType::f16, DType::e4m3};
  constexpr int64_t kGroups[] = {1, 4, 7, 12};
  constexpr int64_t kDims[] = {64, 128, 80, 112};
  SpecRange range;
  range.sparse = false;
  range.k_mean = false;
  range.max_seq_k = 300;
  for (uint64_t seed = 1; seed <= 48; ++seed) {
    Spec spec = random_spec(seed, range);
    spec.seq_q = 1 + int64_t(seed % 4);
    spec.tile_m = 0;
    spec.heads_kv = 1 + int64_t(seed % 2);
    spec.heads_q = spec.heads_kv * kGroups[seed / 2 % 4];
    spec.q_type = kQTypes[seed % 4];
    spec.k_type = kKvTypes[seed % 3];
    spec.v_type = kKvTypes[seed / 3 % 3];
    spec.v_axis = VScaleAxis::head_dim;
    // MX rows hold whole blocks of 32: 80 only where the rows are not MX.
    spec.dim_qk = kDims[seed / 4 % 4];
    if (is_mx(spec.q_type) || is_mx(spec.k_type)) spec.dim_qk = spec.dim_qk / 32 * 32;
    spec.dim_v = kDims[seed / 8 % 4];
    if (is_mx(spec.v_type)) spec.dim_v = spec.dim_v / 32 * 32;
    if (seed % 5 == 0) spec.scale = -spec.scale.value_or(0.2f);
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
    for (const cpu::RowTiles mode :
         {cpu::RowTiles::none, cpu::RowTiles::bf16, cpu::RowTiles::all}) {
      SCOPED_TRACE(int(mode));
      ASSERT_NO_FATAL_FAILURE(expect_every_kernel_set_matches(p, want, mode));
    }
  }
}

// The kernel sets with the AMX kernels (the unit's, or emulated).
std::vector<CpuRunner> amx_runners() {
  std::vector<CpuRunner> runners;
  for (const CpuRunner& r : fast_runners()) {
    if (cpu::fast_kernels(r.isa).attend_bf16) runners.push_back(r);
  }
  return runners;
}

// f32 and f16 Q, K and V with many rows per tile, which the AMX kernels take as sums of bf16 parts
// (f32 three, f16 two): their O and LSE must be as accurate as f32 arithmetic's, at most 8 times
// the portable set's error against the reference plus 2^-22 (of the largest output). Measured on
// f32: up to 4.9 times (every product of parts adds its roundings to the sums), 3.5e-6 of the
// largest output at most; with only the products of parts i + j <= 1 (16 bits) up to 7000 times,
// 1.7e-4, which the output tolerance of the other tests lets through.
TEST(FastEngine, AmxF32PartsKeepF32Accuracy) {
  const std::vector<CpuRunner> amx = amx_runners();
  if (amx.empty()) GTEST_SKIP() << "no kernel set with the AMX kernels here";
  SpecRange range;
  range.mx = false;
  range.low_precision = false;
  range.max_seq_q = 100;
  range.max_seq_k = 200;
  int64_t checked = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Spec spec = random_spec(seed, range);
    spec.seq_q = std::max<int64_t>(spec.seq_q, 24);
    spec.tile_m = 0;
    spec.q_type = seed % 3 == 1 ? DType::f16 : DType::f32;
    spec.k_type = seed % 5 == 2 ? DType::f16 : DType::f32;
    spec.v_type = seed % 7 == 3 ? DType::f16 : DType::f32;
    spec.scale = (seed % 4 == 0 ? -2.0f : 2.0f) / std::sqrt(float(spec.dim_qk));
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
    ASSERT_TRUE(p.run_fast_with(cpu::SimdIsa::portable).is_ok());
    const double o_floor = relative_error(want.o, p.outputs().o);
    const double lse_floor = relative_error(want.lse, p.outputs().lse);
    for (const CpuRunner& runner : amx) {
      SCOPED_TRACE(runner.name());
      ASSERT_TRUE(runner.run(p).is_ok());
      EXPECT_LE(relative_error(want.o, p.outputs().o), 8 * o_floor + 0x1p-22);
      EXPECT_LE(relative_error(want.lse, p.outputs().lse), 8 * lse_floor + 0x1p-22);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 40);
}

// Scores a few hundred log2 units apart: most softmax weights fall below f32's normal range, which
// the engine flushes to zero on its threads (MXCSR FTZ and DAZ while it runs; subnormal weights
// made it 20x slower). The results stay within the tolerance on every kernel set, and the caller's
// floating-point mode, flushing or not, is as it was.
TEST(FastEngine, WideScoresKeepAccuracyAndTheCallersFloatMode) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Spec spec = random_spec(seed);
    // Scores with a standard deviation of about 40 (the default scale gives about 1).
    spec.scale = (seed % 3 == 0 ? -40.0f : 40.0f) / std::sqrt(float(spec.dim_qk));
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
#if defined(__x86_64__)
    // The mode: every bit but the exception flags, which a run may raise.
    constexpr unsigned kMode = ~unsigned(_MM_EXCEPT_MASK);
    constexpr unsigned kFlushBits = _MM_FLUSH_ZERO_ON | _MM_DENORMALS_ZERO_ON;
    const unsigned saved = _mm_getcsr();
    const unsigned mode = seed % 2 ? saved | kFlushBits : saved & ~kFlushBits;
    _mm_setcsr(mode);
#endif
    ASSERT_NO_FATAL_FAILURE(expect_every_kernel_set_matches(p, want));
#if defined(__x86_64__)
    EXPECT_EQ(_mm_getcsr() & kMode, mode & kMode);
    _mm_setcsr(saved);
#endif
  }
}

// MXATTN_CPU_ISA picks the kernel set of Engine::cpu_fast, read once per process; a name that is
// not one of this CPU's sets leaves the best one. Each case runs in a fresh process (a death test
// in the thread-safe style re-runs the binary), where the choice has not been made yet.
TEST(FastEngineApi, EnvironmentPicksTheKernelSet) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto chosen_with = [](const char* name) {
    setenv("MXATTN_CPU_ISA", name, 1);
    const cpu::SimdIsa chosen = cpu::chosen_isa();
    setenv("MXATTN_CPU_ISA", "avx2", 1);  // read once: a later change is not seen
    std::exit(cpu::chosen_isa() == chosen ? int(chosen) : 100);
  };
  const cpu::SimdIsa best = cpu::supported_isas().back();
  EXPECT_EXIT(chosen_with("portable"), ::testing::ExitedWithCode(int(cpu::SimdIsa::portable)), "");
  EXPECT_EXIT(chosen_with("no_such_set"), ::testing::ExitedWithCode(int(best)), "");
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Spec spec = random_spec(seed);
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run_fast_with(best).is_ok());
    const Outputs want = p.outputs();
    ASSERT_TRUE(p.run(Engine::cpu_fast).is_ok());
    EXPECT_TRUE(outputs_bitwise_equal(want, p.outputs()));
  }
}

// Engine::cpu_fast through the public API is the best kernel set of this CPU, bit for bit.
TEST(FastEngineApi, RunsTheBestKernelSet) {
  const cpu::SimdIsa best = cpu::chosen_isa();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Spec spec = random_spec(seed);
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run_fast_with(best).is_ok());
    const Outputs want = p.outputs();
    ASSERT_TRUE(p.run(Engine::cpu_fast).is_ok());
    ASSERT_TRUE(outputs_bitwise_equal(want, p.outputs()));
  }
}

}  // namespace
}  // namespace mxattn::test
