// The problem generator (src/workload): what it refuses, what it promises about its draws, and the
// layouts it builds (paged caches whose padding is never a key, poisoned padding, fixed-count
// sparse layouts, the unquantized twin of a problem).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "base/index.h"
#include "workload/problem.h"

namespace mxattn::workload {
namespace {

Spec small_spec() {
  Spec s;
  s.seed = 7;
  s.batch = 2;
  s.seq_q = 3;
  s.seq_k = 40;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.dim_qk = s.dim_v = 32;
  s.q_type = DType::bf16;
  s.k_type = s.v_type = DType::e4m3;
  return s;
}

// O and LSE of the reference engine on `args`, into f32 buffers of the problem's shapes.
struct ReferenceRun {
  base::HostTensor o, lse;
};
ReferenceRun reference(const Spec& s, AttentionArgs args) {
  ReferenceRun r{base::HostTensor(DType::f32, {s.batch, s.seq_q, s.heads_q, s.dim_v}),
                 base::HostTensor(DType::f32, {s.batch, s.heads_q, s.seq_q})};
  args.o = r.o.view();
  args.lse = r.lse.view();
  args.split = SplitOptions{};
  RunOptions options;
  options.engine = Engine::cpu_reference;
  const Status st = attention(args, options);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return r;
}

bool all_finite(const base::HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.data<float>()[i])) return false;
  return true;
}

// A kv_len outside [0, Sk] is refused by name before any buffer is written (it once sent the
// padding's poisoning past the end of the cache).
TEST(Workload, KvLenOutsideTheKeysIsRefused) {
  for (const int32_t len : {-1, 41, 1 << 30}) {
    for (const int64_t page_size : {int64_t(0), int64_t(32)}) {
      Spec s = small_spec();
      s.page_size = page_size;
      s.kv_len = {40, len};
      Problem p;
      const Status st = Problem::build(s, &p);
      EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << len;
      EXPECT_NE(st.message().find("kv_len[1] = " + std::to_string(len) + " is outside [0, 40]"),
                std::string::npos)
          << st.message();
    }
  }
  Spec broadcast = small_spec();
  broadcast.kv_len = {41};
  Problem p;
  EXPECT_EQ(Problem::build(broadcast, &p).code(), ErrorCode::invalid_argument);
  broadcast.kv_len = {40, 0, 3};  // neither one value nor one per batch entry
  EXPECT_EQ(Problem::build(broadcast, &p).code(), ErrorCode::invalid_argument);
}

// Sk = 7 keys in pages of 32: the 25 padding slots of the last page are poisoned and never keys,
// so the outputs are finite and equal (bit for bit) those of the dense cache of the same keys.
TEST(Workload, PagePaddingIsNeverAKey) {
  for (const int64_t seq_k : {int64_t(7), int64_t(33), int64_t(64)}) {
    Spec s = small_spec();
    s.seq_k = seq_k;
    s.page_size = 32;
    s.spare_pages = 2;
    SCOPED_TRACE(seq_k);
    Problem paged;
    ASSERT_TRUE(Problem::build(s, &paged).is_ok());
    const AttentionArgs& a = paged.args();
    ASSERT_EQ(a.k.shape[1], 32);
    if (seq_k % 32 != 0) {
      ASSERT_TRUE(a.kv_len.given());
      for (int64_t b = 0; b < s.batch; ++b) EXPECT_EQ(base::read_i32(a.kv_len, b), seq_k);
    }
    const ReferenceRun got = reference(s, a);
    EXPECT_TRUE(all_finite(got.o));
    EXPECT_TRUE(all_finite(got.lse));

    Spec dense_spec = s;
    dense_spec.page_size = dense_spec.spare_pages = 0;
    Problem dense;
    ASSERT_TRUE(Problem::build(dense_spec, &dense).is_ok());
    const ReferenceRun want = reference(dense_spec, dense.args());
    EXPECT_EQ(std::memcmp(want.o.view().data, got.o.view().data, size_t(want.o.bytes())), 0);
    EXPECT_EQ(std::memcmp(want.lse.view().data, got.lse.view().data, size_t(want.lse.bytes())), 0);
  }
}

// Every key slot no valid key maps to holds NaN or Inf (plain types) or all-ones codes (MX), and
// none of them changes the outputs.
TEST(Workload, PaddingIsPoisoned) {
  Spec s = small_spec();
  s.k_type = s.v_type = DType::bf16;
  s.kv_len = {40, 9};
  Problem p;
  ASSERT_TRUE(Problem::build(s, &p).is_ok());
  const TensorView& k = p.args().k;
  for (int64_t j = 0; j < 40; ++j) {
    const float x = base::load_float(k, base::offset_of(k, 1, j, 0, 0));
    EXPECT_EQ(std::isfinite(x), j < 9) << j;
  }
  s.poison_padding = false;
  Problem clean;
  ASSERT_TRUE(Problem::build(s, &clean).is_ok());
  const ReferenceRun a = reference(s, p.args()), b = reference(s, clean.args());
  EXPECT_EQ(std::memcmp(a.o.view().data, b.o.view().data, size_t(a.o.bytes())), 0);
}

// A value depends only on the seed and its index: the same keys whatever kv_len (keys past it are
// zero), the same queries whatever the keys' count.
TEST(Workload, DrawsDependOnlyOnTheSeedAndTheIndex) {
  Spec s = small_spec();
  const Data all = generate(s);
  Spec cut = s;
  cut.kv_len = {40, 10};
  const Data part = generate(cut);
  const int64_t row = s.heads_kv * s.dim_qk;
  for (int64_t i = 0; i < 40 * row; ++i) EXPECT_EQ(all.k[size_t(i)], part.k[size_t(i)]);
  for (int64_t i = 40 * row; i < 50 * row; ++i) EXPECT_EQ(all.k[size_t(i)], part.k[size_t(i)]);
  for (int64_t i = 50 * row; i < 80 * row; ++i) EXPECT_EQ(part.k[size_t(i)], 0.0f);
  Spec longer = s;
  longer.seq_k = 100;
  EXPECT_EQ(generate(longer).q, all.q);
  Spec other = s;
  other.seed = 8;
  EXPECT_NE(generate(other).q, all.q);
}

// A fixed-count layout lists round(density * key blocks) blocks of every query block, ascending,
// broadcast over the batch where asked.
TEST(Workload, FixedCountSparseRows) {
  Spec s = small_spec();
  s.seq_q = 100;
  s.seq_k = 256;
  s.block_q = s.block_k = 32;
  s.sparse_density = 0.25;
  s.sparse_fixed_count = true;
  s.sparse_per_batch = false;
  const Data d = generate(s);
  ASSERT_EQ(d.row_ptr_shape, (std::array<int64_t, 3>{1, 4, 5}));
  ASSERT_EQ(d.col_idx_shape, (std::array<int64_t, 3>{1, 4, 8}));
  for (int64_t h = 0; h < 4; ++h) {
    const int32_t* rp = d.row_ptr.data() + h * 5;
    const int32_t* ci = d.col_idx.data() + h * 8;
    for (int64_t qb = 0; qb < 4; ++qb) {
      ASSERT_EQ(rp[qb + 1] - rp[qb], 2);
      EXPECT_LT(ci[rp[qb]], ci[rp[qb] + 1]);
    }
  }
  Problem p;
  EXPECT_TRUE(Problem::build(s, &p).is_ok());
}

// The unquantized twin reads the drawn values in a dense layout: K smoothing's k_mean belongs to
// the stored keys and goes, a given k_mean belongs to the problem and stays; rotation and
// smoothing change the stored problem's result only by the quantization error.
TEST(Workload, UnquantizedArgsKeepTheProblem) {
  Spec s = small_spec();
  s.page_size = 16;
  s.strided = true;
  s.hadamard = true;
  s.smooth_k = true;
  s.k_type = s.v_type = DType::f32;
  s.q_type = DType::f32;
  Problem p;
  ASSERT_TRUE(Problem::build(s, &p).is_ok());
  ASSERT_TRUE(p.args().k_mean.given());
  base::HostTensor o(DType::f32, {s.batch, s.seq_q, s.heads_q, s.dim_v});
  const AttentionArgs exact = p.unquantized_args(o.view(), {});
  EXPECT_FALSE(exact.k_mean.given());
  EXPECT_FALSE(exact.paged.given());
  EXPECT_EQ(exact.k.shape[1], s.seq_k);
  const ReferenceRun stored = reference(s, p.args()), truth = reference(s, exact);
  for (int64_t i = 0; i < stored.o.numel(); ++i) {
    EXPECT_NEAR(stored.o.data<float>()[i], truth.o.data<float>()[i], 1e-5) << i;
  }

  Spec given = small_spec();
  given.k_mean = true;
  Problem g;
  ASSERT_TRUE(Problem::build(given, &g).is_ok());
  EXPECT_TRUE(g.unquantized_args(o.view(), {}).k_mean.given());
}

// Given inputs must have the spec's shapes.
TEST(Workload, GivenInputsOfTheWrongShapeAreRefused) {
  Spec s = small_spec();
  base::HostTensor q(DType::f32, {s.batch, s.seq_q, s.heads_q, 16});
  base::HostTensor k(DType::f32, {s.batch, s.seq_k, s.heads_kv, s.dim_qk});
  Inputs in;
  in.q = &q.view();
  in.k = &k.view();
  in.v = &k.view();
  Problem p;
  const Status st = Problem::build(s, &p, in);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.message().find("Q input must be"), std::string::npos) << st.message();
}

// Head-major K and V: each head's keys one after another, the same values as token-major.
TEST(Workload, HeadMajorKeepsTheValues) {
  Spec s = small_spec();
  Problem token;
  ASSERT_TRUE(Problem::build(s, &token).is_ok());
  s.kv_head_major = true;
  Problem head;
  ASSERT_TRUE(Problem::build(s, &head).is_ok());
  const TensorView &a = token.args().k, &b = head.args().k;
  EXPECT_EQ(b.stride[2], b.shape[1] * b.stride[1]);
  for (int64_t j = 0; j < s.seq_k; ++j)
    for (int64_t h = 0; h < s.heads_kv; ++h) {
      const auto* x = static_cast<const uint8_t*>(a.data) + base::offset_of(a, 1, j, h, 0);
      const auto* y = static_cast<const uint8_t*>(b.data) + base::offset_of(b, 1, j, h, 0);
      ASSERT_EQ(std::memcmp(x, y, size_t(s.dim_qk)), 0);
    }
}

}  // namespace
}  // namespace mxattn::workload
