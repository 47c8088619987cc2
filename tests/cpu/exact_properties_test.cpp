// Properties that hold bit for bit on both CPU engines, the fast one with every kernel set: GQA is
// KV heads repeated, an all-present sparse layout is dense, a paged cache is the dense one, a
// head-major cache is the token-major one, memory outside the valid keys changes nothing, and rows
// that see nothing give exactly 0 and -inf on every path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/plan.h"
#include "core/problem.h"
#include "cpu/compare.h"
#include "cpu/engines.h"
#include "cpu/runners.h"
#include "cpu/test_problem.h"

namespace mxattn::test {
namespace {

class ExactTest : public ::testing::TestWithParam<CpuRunner> {
 protected:
  Outputs run(TestProblem& p) {
    const Status st = GetParam().run(p);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return p.outputs();
  }

  // `spec` (a paged cache) run as it is, then on the same keys laid out as a dense cache: the same
  // bits.
  void expect_paged_equals_dense(const Spec& spec) {
    SCOPED_TRACE(spec.describe());
    TestProblem paged(spec);
    const Outputs want = run(paged);

    Spec dense = spec;
    dense.page_size = 0;
    dense.spare_pages = 0;
    ProblemData data = paged.data();
    data.block_table.clear();
    data.num_pages = 0;
    TestProblem p(dense, data);
    EXPECT_TRUE(outputs_bitwise_equal(want, run(p)));
  }
};

// Every fourth seed has Q, K and V all bf16, which the AMX kernels take as they are (f32 and f16
// as bf16 parts).
SpecRange small_range(uint64_t seed) {
  SpecRange r;
  r.max_work = 800'000;
  r.bf16_inputs = seed % 4 == 0;
  return r;
}

// KV head h of the data, repeated for every query head that reads it.
ProblemData repeat_kv_heads(const Spec& spec, const ProblemData& d) {
  ProblemData r = d;
  const int64_t g = spec.group();
  const auto repeat = [&](const std::vector<float>& src, int64_t rows, int64_t dim) {
    std::vector<float> out;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t h = 0; h < spec.heads_q; ++h) {
        const auto first = src.begin() + (row * spec.heads_kv + h / g) * dim;
        out.insert(out.end(), first, first + dim);
      }
    return out;
  };
  r.k = repeat(d.k, spec.batch * spec.seq_k, spec.dim_qk);
  r.v = repeat(d.v, spec.batch * spec.seq_k, spec.dim_v);
  if (!d.k_mean.empty()) r.k_mean = repeat(d.k_mean, spec.batch, spec.dim_qk);
  return r;
}

TEST_P(ExactTest, GqaEqualsRepeatedKvHeads) {
  for (uint64_t seed = 4001; seed <= 4020; ++seed) {
    SpecRange range = small_range(seed);
    range.max_heads_kv = 2;
    Spec spec = random_spec(seed, range);
    if (spec.group() == 1) spec.heads_q = spec.heads_kv * int64_t(2 + seed % 4);
    SCOPED_TRACE(spec.describe());
    TestProblem grouped(spec);
    const Outputs want = run(grouped);

    Spec repeated = spec;
    repeated.heads_kv = spec.heads_q;
    TestProblem mha(repeated, repeat_kv_heads(spec, grouped.data()));
    ASSERT_TRUE(outputs_bitwise_equal(want, run(mha)));
  }
}

TEST_P(ExactTest, AllPresentSparseLayoutEqualsDense) {
  for (uint64_t seed = 5001; seed <= 5020; ++seed) {
    SpecRange range = small_range(seed);
    range.sparse = false;
    Spec spec = random_spec(seed, range);
    spec.block_q = int32_t(16 << (seed % 3));
    spec.block_k = int32_t(16 << ((seed / 3) % 3));
    spec.sparse_density = 1.0;
    spec.sparse_per_batch = seed % 2 == 0;
    SCOPED_TRACE(spec.describe());
    TestProblem sparse(spec);
    const Outputs want = run(sparse);

    // The dense run uses the tiles the sparse plan settled on, so both share one partition.
    core::Problem problem;
    ASSERT_TRUE(core::validate_problem(sparse.args(), &problem).is_ok());
    const core::SplitParams tiles = api::split_params(problem, api::EngineKind::cpu_fast);
    Spec dense = spec;
    dense.block_q = dense.block_k = 0;
    dense.tile_m = int32_t(tiles.tile_m);
    dense.tile_n = int32_t(tiles.tile_n);
    ProblemData data = sparse.data();
    data.row_ptr.clear();
    data.col_idx.clear();
    TestProblem p(dense, data);
    ASSERT_TRUE(outputs_bitwise_equal(want, run(p)));
  }
}

TEST_P(ExactTest, PagedEqualsDense) {
  for (uint64_t seed = 6001; seed <= 6020; ++seed) {
    SpecRange range = small_range(seed);
    range.paged = false;
    Spec spec = random_spec(seed, range);
    spec.page_size = spec.v_axis == VScaleAxis::keys ? 32 : int64_t(16 << (seed % 3));
    spec.seq_k = (spec.seq_k + spec.page_size - 1) / spec.page_size * spec.page_size;
    spec.spare_pages = int64_t(seed % 3);
    for (int32_t& len : spec.kv_len) len = int32_t(std::min<int64_t>(len, spec.seq_k));
    expect_paged_equals_dense(spec);
  }
}

// The fast engine reads a dense f32 cache's tiles where they lie (head dim a multiple of 16, many
// query rows) and gathers a paged cache's: both give the same bits, contiguous or strided, with
// GQA, causal masks, kv_len and splits.
TEST_P(ExactTest, DenseF32ReadInPlaceEqualsPagedGathered) {
  for (const bool strided : {false, true}) {
    Spec spec;
    spec.seed = strided ? 6102 : 6101;
    spec.batch = 2;
    spec.seq_q = 40;
    spec.seq_k = 192;
    spec.heads_q = 4;
    spec.heads_kv = 2;
    spec.dim_qk = 64;
    spec.dim_v = 32;
    spec.causal = Causal::bottom_right;
    spec.kv_len = {192, 150};
    spec.split_kv = 3;
    spec.tile_m = 16;
    spec.tile_n = 32;
    spec.page_size = 32;
    spec.spare_pages = 1;
    spec.strided = strided;
    expect_paged_equals_dense(spec);
  }
}

// NaN and Inf in every key slot past kv_len and in every page outside the block table.
TEST_P(ExactTest, PaddingContentsChangeNothing) {
  for (uint64_t seed = 7001; seed <= 7030; ++seed) {
    Spec spec = random_spec(seed, small_range(seed));
    if (spec.kv_len.empty()) spec.kv_len.assign(size_t(spec.batch), int32_t(spec.seq_k / 2));
    if (spec.paged()) spec.spare_pages = 2;
    spec.poison_padding = false;
    SCOPED_TRACE(spec.describe());
    TestProblem clean(spec);
    const Outputs want = run(clean);

    spec.poison_padding = true;
    TestProblem poisoned(spec);
    ASSERT_TRUE(outputs_bitwise_equal(want, run(poisoned)));
  }
}

// Problems rich in empty rows (zero lengths, narrow windows, misaligned causal diagonals, sparse
// gaps), run through every split path.
TEST_P(ExactTest, EmptyRowsAreZeroAndMinusInfOnEveryPath) {
  int64_t empty_rows = 0;
  for (uint64_t seed = 8001; seed <= 8015; ++seed) {
    Spec spec = random_spec(seed, small_range(seed));
    spec.kv_len.assign(size_t(spec.batch), 0);
    for (int64_t b = 1; b < spec.batch; ++b)
      spec.kv_len[size_t(b)] = int32_t((seed * b) % (spec.seq_k + 1));
    if (seed % 2) {
      spec.causal = Causal::bottom_right;
      spec.prefix_offset.clear();
    }
    if (seed % 3 == 0) spec.window = 0;
    if (spec.causal == Causal::prefix) spec.prefix_offset.assign(size_t(spec.batch), 0);
    if (spec.sparse()) spec.sparse_density = 0.3;
    for (int32_t split_kv : {1, 3, 0}) {
      for (bool partials : {false, true}) {
        Spec path = spec;
        path.split_kv = split_kv;
        path.partials = partials;
        path.early_exit = partials && split_kv != 1;
        SCOPED_TRACE(path.describe());
        TestProblem p(path);
        const Outputs out = run(p);
        ASSERT_TRUE(empty_rows_exact(p, out, &empty_rows));
      }
    }
  }
  EXPECT_GT(empty_rows, 0);
}

// The thread count shares out work, never arithmetic.
TEST_P(ExactTest, ThreadCountChangesNothing) {
  for (uint64_t seed = 12001; seed <= 12010; ++seed) {
    const Spec spec = random_spec(seed, small_range(seed));
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(GetParam().run(p, 1).is_ok());
    const Outputs want = p.outputs();
    for (int threads : {2, 3}) {
      SCOPED_TRACE(threads);
      ASSERT_TRUE(GetParam().run(p, threads).is_ok());
      ASSERT_TRUE(outputs_bitwise_equal(want, p.outputs()));
    }
  }
}

// Decode over a few thousand keys: the fast engine groups KV heads into work items by the thread
// count, runs the last items one head each and cuts each split into pieces, merged by whichever
// thread stores a split's last piece. None of that may change a bit.
TEST_P(ExactTest, LongDecodeIsTheSameAtEveryThreadCount) {
  for (int variant = 0; variant < 4; ++variant) {
    Spec spec;
    spec.seed = 12100 + uint64_t(variant);
    spec.heads_q = 16;
    spec.heads_kv = 8;
    spec.dim_qk = spec.dim_v = 64;
    spec.seq_k = 4160 + 77 * variant;
    spec.q_type = variant < 2 ? DType::bf16 : DType::f32;
    spec.k_type = spec.v_type = variant % 2 == 0 ? DType::bf16 : DType::e4m3;
    spec.o_type = DType::bf16;
    spec.split_kv = variant < 2 ? 1 : 3;
    spec.partials = variant == 3;
    spec.kv_len = {int32_t(spec.seq_k - 5 * variant)};
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(GetParam().run(p, 1).is_ok());
    const Outputs want = p.outputs();
    for (int threads : {2, 3, 5, 8}) {
      SCOPED_TRACE(threads);
      ASSERT_TRUE(GetParam().run(p, threads).is_ok());
      ASSERT_TRUE(outputs_bitwise_equal(want, p.outputs()));
    }
  }
}

// A head-major cache (K, V and their scales stored [B or pages, Hkv, keys, ...], passed as the
// usual view with its strides) reads the same values as a token-major one: decode (the direct-row
// and tile kernels, bf16 and E4M3 rows, dense and paged, split or not) and many query rows give the
// same bits.
TEST_P(ExactTest, HeadMajorCacheChangesNothing) {
  for (int variant = 0; variant < 6; ++variant) {
    Spec spec;
    spec.seed = 12300 + uint64_t(variant);
    spec.seq_q = variant < 4 ? 1 : 37;
    spec.seq_k = variant < 4 ? 1088 + 64 * variant : 300;
    spec.heads_q = 16;
    spec.heads_kv = 8;
    spec.dim_qk = spec.dim_v = 128;
    spec.q_type = variant % 3 == 2 ? DType::f32 : DType::bf16;
    spec.k_type = spec.v_type = variant % 2 == 0 ? DType::bf16 : DType::e4m3;
    spec.o_type = DType::bf16;
    spec.page_size = variant == 2 || variant == 3 ? 64 : 0;
    spec.split_kv = variant == 1 ? 3 : 1;
    spec.partials = variant == 1;
    spec.kv_len = {int32_t(spec.seq_k - 9 * variant)};
    SCOPED_TRACE(spec.describe());
    TestProblem token_major(spec);
    ASSERT_TRUE(GetParam().run(token_major, 2).is_ok());
    const Outputs want = token_major.outputs();
    Spec head_major = spec;
    head_major.kv_head_major = true;
    TestProblem p(head_major, token_major.data());
    // Each head's keys one after the other: a key apart by a row, a head apart by all the keys.
    ASSERT_EQ(p.args().k.stride[2], p.args().k.shape[1] * p.args().k.stride[1]);
    ASSERT_LT(token_major.args().k.stride[2], token_major.args().k.stride[1]);
    ASSERT_TRUE(GetParam().run(p, 2).is_ok());
    EXPECT_TRUE(outputs_bitwise_equal(want, p.outputs()));
  }
}

// The fast engine keeps each thread's scratch from one call to the next. A call whose every key
// and value is NaN, between two runs of another problem, must leave the second run's bits as the
// first's: nothing a call reads in its scratch may be left from an earlier one. Where the types
// allow, the NaN call's head dims are 8 wider, within the same padded width.
TEST_P(ExactTest, AnEarlierCallChangesNothing) {
  constexpr DType kKvTypes[] = {DType::bf16, DType::e4m3, DType::f32};
  for (int variant = 0; variant < 6; ++variant) {
    Spec spec;
    spec.seed = 12200 + uint64_t(variant);
    // Decode over fewer keys than a key tile (the first step is the last, of part of a tile),
    // then many query rows over several tiles.
    spec.seq_q = variant < 3 ? 1 : 37;
    spec.seq_k = variant < 3 ? 37 + 7 * variant : 150 + 29 * variant;
    spec.heads_q = 8;
    spec.heads_kv = 2;
    spec.q_type = variant % 3 == 0 ? DType::bf16 : DType::f32;
    spec.k_type = spec.v_type = kKvTypes[variant % 3];
    const bool mx = is_mx(spec.k_type);
    spec.dim_qk = mx ? 128 : 120;
    spec.dim_v = mx ? 64 : 56;
    spec.kv_len = {int32_t(spec.seq_k - 3 * variant)};
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    Spec nan_spec = spec;
    nan_spec.dim_qk = 128;
    nan_spec.dim_v = 64;
    ProblemData poisoned = TestProblem(nan_spec).data();
    std::fill(poisoned.k.begin(), poisoned.k.end(), NAN);
    std::fill(poisoned.v.begin(), poisoned.v.end(), NAN);
    TestProblem nan_keys(nan_spec, poisoned);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      ASSERT_TRUE(GetParam().run(p, threads).is_ok());
      const Outputs want = p.outputs();
      ASSERT_TRUE(GetParam().run(nan_keys, threads).is_ok());
      ASSERT_TRUE(GetParam().run(p, threads).is_ok());
      ASSERT_TRUE(outputs_bitwise_equal(want, p.outputs()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuEngines, ExactTest, ::testing::ValuesIn(cpu_runners()), runner_name);

}  // namespace
}  // namespace mxattn::test
