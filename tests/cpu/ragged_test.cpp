// Ragged batches (spec §10) on the CPU engines: a call over packed query rows of sequences of
// different lengths (decodes of one row beside prefill chunks, rows of length 0) equals, bitwise,
// one padded call per sequence with copies of its rows, keys and metadata; over dense and paged
// caches of plain and MX formats, GQA ratios, Dqk 192 / Dv 128, causal alignments and windows.
// Bad metadata gives named errors with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/mx.h"
#include "mxattn/ragged.h"

namespace mxattn::test {
namespace {

using base::HostTensor;

struct RaggedCase {
  uint64_t seed = 1;
  std::vector<int32_t> q_lens, seq_lens;
  int64_t heads_q = 4, heads_kv = 2, dim_qk = 64, dim_v = 64, seq_k = 96;
  DType q_type = DType::f32, kv_type = DType::bf16, o_type = DType::f32;
  int64_t page_size = 0;  // 0: dense
  Causal causal = Causal::none;
  int64_t window = -1;
  int32_t split_kv = 0;
  Engine engine = Engine::cpu_fast;

  std::string describe() const {
    std::string s = "seed=" + std::to_string(seed) + " q_lens=";
    for (int32_t x : q_lens) s += std::to_string(x) + ",";
    s += " seq_lens=";
    for (int32_t x : seq_lens) s += std::to_string(x) + ",";
    return s + " Hq=" + std::to_string(heads_q) + " Hkv=" + std::to_string(heads_kv) +
           " D=" + std::to_string(dim_qk) + "/" + std::to_string(dim_v) +
           " kv=" + std::string(name_of(kv_type)) + " page_size=" + std::to_string(page_size) +
           " causal=" + std::to_string(int(causal)) + " window=" + std::to_string(window) +
           " split_kv=" + std::to_string(split_kv) +
           (engine == Engine::cpu_reference ? " reference" : " fast");
  }
};

RaggedCase random_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  RaggedCase c;
  c.seed = seed;
  const int64_t sequences = pick(1, 6);
  c.heads_kv = pick(1, 3);
  c.heads_q = c.heads_kv * std::vector<int64_t>{1, 3, 4}[size_t(pick(0, 2))];
  if (pick(0, 3) == 0) {
    c.dim_qk = 192;
    c.dim_v = 128;
  }
  c.seq_k = 32 * pick(1, 5);
  c.kv_type =
      std::vector<DType>{DType::f32, DType::bf16, DType::e4m3, DType::e2m1}[size_t(pick(0, 3))];
  c.q_type = pick(0, 1) ? DType::f32 : DType::bf16;
  c.o_type = pick(0, 1) ? DType::f32 : DType::bf16;
  if (pick(0, 1)) c.page_size = 16;
  c.causal =
      std::vector<Causal>{Causal::none, Causal::bottom_right, Causal::top_left}[size_t(pick(0, 2))];
  if (pick(0, 3) == 0) c.window = pick(0, 40);
  c.split_kv = int32_t(pick(0, 3));
  c.engine = pick(0, 2) == 0 ? Engine::cpu_reference : Engine::cpu_fast;
  for (int64_t b = 0; b < sequences; ++b) {
    const int64_t kind = pick(0, 3);
    const int64_t q_len = kind == 0 ? 0 : kind == 1 ? 1 : pick(2, 40);
    c.q_lens.push_back(int32_t(q_len));
    c.seq_lens.push_back(int32_t(pick(0, c.seq_k)));
  }
  return c;
}

void fill(HostTensor& t, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t e = 0; e < t.numel(); ++e) base::store_float(t.view(), e, normal(rng));
}

// K or V of a case as stored: the f32 values [B, Sk, Hkv, D] quantized or rounded, and laid out
// dense or in pages (each sequence's pages in a shuffled order).
struct StoredKv {
  HostTensor data, scales;
};
StoredKv store(const HostTensor& values, DType type, int64_t page_size,
               const std::vector<int32_t>& page_of) {
  const TensorView& v = values.view();
  const int64_t B = v.shape[0], S = v.shape[1], H = v.shape[2], D = v.shape[3];
  HostTensor dense(type, {B, S, H, D}), dense_scales;
  if (is_mx(type)) {
    dense_scales = HostTensor(DType::e8m0, {B, S, H, D / 32});
    EXPECT_TRUE(quantize(v, dense.view(), dense_scales.view(), 3, ScaleMode::floor).is_ok());
  } else {
    for (int64_t e = 0; e < values.numel(); ++e) {
      base::store_float(dense.view(), e, base::load_float(v, e));
    }
  }
  if (page_size == 0) return {std::move(dense), std::move(dense_scales)};
  // Pages: page_of[b * pages_per_seq + p] holds keys [p * page_size, (p + 1) * page_size) of b.
  const int64_t per_seq = S / page_size;
  const int64_t row_bytes = H * D * bits_of(type) / 8, scale_row = H * D / 32;
  StoredKv out{HostTensor(type, {B * per_seq, page_size, H, D}), HostTensor()};
  if (is_mx(type)) out.scales = HostTensor(DType::e8m0, {B * per_seq, page_size, H, D / 32});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < S; ++j) {
      const int64_t page = page_of[size_t(b * per_seq + j / page_size)];
      const int64_t slot = page * page_size + j % page_size;
      std::memcpy(out.data.data<uint8_t>() + slot * row_bytes,
                  dense.data<uint8_t>() + (b * S + j) * row_bytes, size_t(row_bytes));
      if (is_mx(type)) {
        std::memcpy(out.scales.data<uint8_t>() + slot * scale_row,
                    dense_scales.data<uint8_t>() + (b * S + j) * scale_row, size_t(scale_row));
      }
    }
  }
  return out;
}

struct Built {
  HostTensor q, k_values, v_values, o, lse;
  StoredKv k, v;
  std::vector<int32_t> cu, seq_lens, page_of, table;
  RaggedArgs args;
};

void build(const RaggedCase& c, Built& x) {
  std::mt19937_64 rng(c.seed * 31 + 7);
  const int64_t B = int64_t(c.q_lens.size());
  x.cu = {0};
  for (int32_t n : c.q_lens) x.cu.push_back(x.cu.back() + n);
  const int64_t total = x.cu.back();
  x.q = HostTensor(c.q_type, {total, c.heads_q, c.dim_qk});
  x.k_values = HostTensor(DType::f32, {B, c.seq_k, c.heads_kv, c.dim_qk});
  x.v_values = HostTensor(DType::f32, {B, c.seq_k, c.heads_kv, c.dim_v});
  fill(x.q, rng);
  fill(x.k_values, rng);
  fill(x.v_values, rng);
  const int64_t per_seq = c.page_size ? c.seq_k / c.page_size : 0;
  for (int64_t p = 0; p < B * per_seq; ++p) x.page_of.push_back(int32_t(p));
  std::shuffle(x.page_of.begin(), x.page_of.end(), rng);
  x.k = store(x.k_values, c.kv_type, c.page_size, x.page_of);
  x.v = store(x.v_values, c.kv_type, c.page_size, x.page_of);
  x.o = HostTensor(c.o_type, {total, c.heads_q, c.dim_v});
  x.lse = HostTensor(DType::f32, {c.heads_q, total});
  for (int64_t e = 0; e < x.o.numel(); ++e) base::store_float(x.o.view(), e, NAN);
  for (int64_t e = 0; e < x.lse.numel(); ++e) x.lse.data<float>()[e] = NAN;
  x.seq_lens = c.seq_lens;
  RaggedArgs& a = x.args;
  a.q = x.q.view();
  a.cu_seqlens_q = make_view(x.cu.data(), DType::i32, {B + 1});
  a.seq_lens = make_view(x.seq_lens.data(), DType::i32, {B});
  a.k = x.k.data.view();
  a.v = x.v.data.view();
  if (is_mx(c.kv_type)) {
    a.k_scales = x.k.scales.view();
    a.v_scales = x.v.scales.view();
  }
  if (c.page_size) {
    x.table = x.page_of;  // row b: sequence b's pages in key order
    a.paged.page_size = c.page_size;
    a.paged.block_table = make_view(x.table.data(), DType::i32, {B, per_seq});
  }
  a.o = x.o.view();
  a.lse = x.lse.view();
  a.causal = c.causal;
  a.window = c.window;
  a.split.split_kv = c.split_kv;
}

// Sequence b alone in a padded call of its own, over copies of its rows, keys and metadata.
void expect_sequence_equals_padded_call(const RaggedCase& c, const Built& x, int64_t b) {
  const int64_t first = x.cu[size_t(b)], rows = c.q_lens[size_t(b)];
  if (rows == 0) return;
  const int64_t q_row = c.heads_q * c.dim_qk, o_row = c.heads_q * c.dim_v;
  HostTensor q(c.q_type, {1, rows, c.heads_q, c.dim_qk});
  std::memcpy(q.data<uint8_t>(), x.q.data<uint8_t>() + first * q_row * bits_of(c.q_type) / 8,
              size_t(q.bytes()));
  RaggedCase one = c;
  one.q_lens = {int32_t(rows)};
  HostTensor k_values(DType::f32, {1, c.seq_k, c.heads_kv, c.dim_qk});
  HostTensor v_values(DType::f32, {1, c.seq_k, c.heads_kv, c.dim_v});
  std::memcpy(k_values.data<uint8_t>(), x.k_values.data<uint8_t>() + b * k_values.bytes(),
              size_t(k_values.bytes()));
  std::memcpy(v_values.data<uint8_t>(), x.v_values.data<uint8_t>() + b * v_values.bytes(),
              size_t(v_values.bytes()));
  const StoredKv k = store(k_values, c.kv_type, 0, {}), v = store(v_values, c.kv_type, 0, {});
  HostTensor o(c.o_type, {1, rows, c.heads_q, c.dim_v}), lse(DType::f32, {1, c.heads_q, rows});
  int32_t kv_len = c.seq_lens[size_t(b)];
  AttentionArgs a;
  a.q = q.view();
  a.k = k.data.view();
  a.v = v.data.view();
  if (is_mx(c.kv_type)) {
    a.k_scales = k.scales.view();
    a.v_scales = v.scales.view();
  }
  a.o = o.view();
  a.lse = lse.view();
  a.kv_len = make_view(&kv_len, DType::i32, {1});
  a.causal = c.causal;
  a.window = c.window;
  a.split.split_kv = c.split_kv;
  RunOptions options;
  options.engine = c.engine;
  ASSERT_TRUE(attention(a, options).is_ok());
  for (int64_t e = 0; e < rows * o_row; ++e) {
    const float want = base::load_float(o.view(), e);
    const float got = base::load_float(x.o.view(), first * o_row + e);
    ASSERT_TRUE(want == got || (std::isnan(want) && std::isnan(got)))
        << "sequence " << b << " O element " << e << ": padded " << want << ", ragged " << got;
  }
  for (int64_t h = 0; h < c.heads_q; ++h) {
    for (int64_t i = 0; i < rows; ++i) {
      const float want = lse.data<float>()[h * rows + i];
      const float got = x.lse.data<float>()[h * x.cu.back() + first + i];
      ASSERT_TRUE(want == got || (std::isnan(want) && std::isnan(got)))
          << "sequence " << b << " LSE (" << h << ", " << i << ")";
    }
  }
}

TEST(Ragged, EqualsOnePaddedCallPerSequence) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const RaggedCase c = random_case(seed);
    SCOPED_TRACE(c.describe());
    Built x;
    build(c, x);
    RunOptions options;
    options.engine = c.engine;
    const Status st = attention(x.args, options);
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (int64_t b = 0; b < int64_t(c.q_lens.size()); ++b) {
      ASSERT_NO_FATAL_FAILURE(expect_sequence_equals_padded_call(c, x, b));
    }
  }
}

// A sequence's bits do not depend on the rest of the batch: the same sequence in two different
// mixes gives the same O and LSE.
TEST(Ragged, BatchInvariant) {
  RaggedCase c = random_case(3);
  c.q_lens = {5, 1, 17};
  c.seq_lens = {64, 30, 90};
  c.seq_k = 96;
  c.split_kv = 0;
  Built x;
  build(c, x);
  ASSERT_TRUE(attention(x.args).is_ok());
  RaggedCase d = c;
  d.q_lens = {17};
  d.seq_lens = {90};
  Built y;
  build(d, y);
  // The third sequence of x alone: copy its rows and keys into y.
  const int64_t q_row = c.heads_q * c.dim_qk * bits_of(c.q_type) / 8;
  std::memcpy(y.q.data<uint8_t>(), x.q.data<uint8_t>() + 6 * q_row, size_t(17 * q_row));
  const int64_t kv_bytes = x.k.data.bytes() / 3, kvs_bytes = x.k.scales.bytes() / 3;
  if (c.page_size == 0) {
    std::memcpy(y.k.data.data<uint8_t>(), x.k.data.data<uint8_t>() + 2 * kv_bytes,
                size_t(kv_bytes));
    std::memcpy(y.v.data.data<uint8_t>(), x.v.data.data<uint8_t>() + 2 * kv_bytes,
                size_t(kv_bytes));
    if (kvs_bytes > 0) {
      std::memcpy(y.k.scales.data<uint8_t>(), x.k.scales.data<uint8_t>() + 2 * kvs_bytes,
                  size_t(kvs_bytes));
      std::memcpy(y.v.scales.data<uint8_t>(), x.v.scales.data<uint8_t>() + 2 * kvs_bytes,
                  size_t(kvs_bytes));
    }
  } else {
    y.args.k = x.args.k;  // the same pools, sequence 2's block-table row
    y.args.v = x.args.v;
    y.args.k_scales = x.args.k_scales;
    y.args.v_scales = x.args.v_scales;
    y.table.assign(x.table.begin() + 2 * (c.seq_k / 16), x.table.end());
    y.args.paged.block_table.data = y.table.data();
  }
  ASSERT_TRUE(attention(y.args).is_ok());
  const int64_t o_row = c.heads_q * c.dim_v;
  for (int64_t e = 0; e < 17 * o_row; ++e) {
    ASSERT_EQ(base::load_float(y.o.view(), e), base::load_float(x.o.view(), 6 * o_row + e));
  }
}

TEST(Ragged, BadMetadataIsNamedAndNothingIsWritten) {
  RaggedCase c = random_case(9);
  c.page_size = 16;
  c.q_lens = {3, 2, 4};
  c.seq_lens = {10, 20, 30};
  const auto rejected = [&](const std::function<void(Built&)>& spoil, const std::string& message) {
    Built x;
    build(c, x);
    spoil(x);
    const std::vector<uint8_t> before(x.o.data<uint8_t>(), x.o.data<uint8_t>() + x.o.bytes());
    const Status st = attention(x.args);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << message;
    EXPECT_NE(st.message().find(message), std::string::npos) << st.message();
    EXPECT_TRUE(std::equal(before.begin(), before.end(), x.o.data<uint8_t>()));
  };
  rejected([](Built& x) { x.cu[2] = 1; },
           "cu_seqlens_q must not decrease: cu_seqlens_q[2] = 1 is below cu_seqlens_q[1] = 3");
  rejected([](Built& x) { x.cu[0] = 1; }, "cu_seqlens_q[0] must be 0, found 1");
  rejected([](Built& x) { x.cu[3] = 8; },
           "cu_seqlens_q[3] must be total_q = 9 (q's rows), found 8");
  rejected([&](Built& x) { x.seq_lens[1] = int32_t(c.seq_k + 1); }, "sequence 1: kv_len[0]");
  rejected([](Built& x) { x.args.lse.shape[1] = 4; }, "lse must have shape [Hq, total_q]");
  if (c.page_size) {
    rejected([](Built& x) { x.table[0] = 1000; }, "sequence 0: block_table[0, 0]");
  }
}

}  // namespace
}  // namespace mxattn::test
