// Sequence-parallel attention under mpirun (SPEC 8): every rank builds the same whole problem from
// a seed, runs it in one process, then runs its shard through the all-to-alls; its rows must match
// bit for bit. Random problems cover uneven (and empty) shards, GQA with fewer KV heads than ranks,
// MX payloads with both V scale layouts, quantize-before-send, every mask, and sparse layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "dist/layout.h"
#include "dist/slice.h"
#include "dist/world.h"
#include "mxattn/dist.h"
#include "mxattn/mx.h"
#include "workload/workload.h"

namespace mxattn::test {
namespace {

using dist::Shard;

class ShardedAttention : public CollectiveTest {};

// One random case: the whole problem, how the ranks shard it, and how it runs.
struct Case {
  workload::Config config;
  std::vector<int64_t> q_lengths;
  std::vector<int64_t> kv_lengths;
  Engine engine = Engine::cpu_reference;
  dist::SendQuantization quantization;

  std::string describe(const workload::Workload& w) const {
    std::ostringstream s;
    s << w.describe() << " | shards q";
    for (int64_t n : q_lengths) s << " " << n;
    s << ", kv";
    for (int64_t n : kv_lengths) s << " " << n;
    s << (engine == Engine::cpu_reference ? " | reference" : " | fast");
    if (quantization.q) s << " | Q sent as " << name_of(*quantization.q);
    if (quantization.k) s << " | K sent as " << name_of(*quantization.k);
    if (quantization.v) s << " | V sent as " << name_of(*quantization.v);
    return s.str();
  }
};

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  return *(values.begin() + rng() % values.size());
}

// `total` cut into `ranks` contiguous lengths (some may be 0), each but the last a multiple of
// `unit`.
std::vector<int64_t> random_lengths(std::mt19937_64& rng, int64_t total, int ranks, int64_t unit) {
  std::vector<int64_t> cuts = {0};
  for (int r = 1; r < ranks; ++r) {
    int64_t cut = int64_t(rng() % uint64_t(total + 1)) / unit * unit;
    cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(total);
  std::vector<int64_t> lengths;
  for (int r = 0; r < ranks; ++r) lengths.push_back(cuts[size_t(r) + 1] - cuts[size_t(r)]);
  return lengths;
}

Case random_case(uint64_t seed, int ranks) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  Case c;
  workload::Config& w = c.config;
  w.seed = seed;
  w.batch = pick<int64_t>(rng, {1, 2});
  w.heads_q = 12;
  w.heads_kv = pick<int64_t>(rng, {1, 2, 3, 4, 6, 12});
  w.seq_k = 1 + int64_t(rng() % 140);
  w.seq_q = rng() % 3 != 0 ? w.seq_k : 1 + int64_t(rng() % 70);
  w.dim_qk = pick<int64_t>(rng, {32, 64});
  w.dim_v = pick<int64_t>(rng, {32, 64});
  w.q_format = pick(rng, {DType::f32, DType::bf16, DType::f16, DType::e4m3, DType::e2m1});
  w.k_format = pick(rng, {DType::bf16, DType::e4m3, DType::e5m2, DType::e2m3, DType::e2m1});
  w.v_format = pick(rng, {DType::f16, DType::e4m3, DType::e3m2, DType::e2m3, DType::e2m1});
  w.o_format = pick(rng, {DType::f32, DType::bf16, DType::f16});
  const bool v_keys = is_mx(w.v_format) && rng() % 3 == 0;
  w.v_scale_axis = v_keys ? VScaleAxis::keys : VScaleAxis::head_dim;
  w.scale_mode = pick(rng, {ScaleMode::floor, ScaleMode::rceil});
  w.causal = pick(rng, {Causal::none, Causal::top_left, Causal::bottom_right, Causal::prefix});
  if (w.causal == Causal::prefix) w.prefix_offset = {int32_t(rng() % 40)};
  if (rng() % 3 == 0) w.kv_len = {int32_t(rng() % uint64_t(w.seq_k + 1))};
  if (rng() % 4 == 0) w.window = int64_t(rng() % 50);
  w.return_lse = rng() % 4 != 0;
  if (rng() % 3 == 0) {
    w.sparse_density = 0.5;
    w.block_q = pick(rng, {16, 32, 64});
    w.block_k = pick(rng, {16, 32, 64});
  }
  w.split_kv = pick(rng, {0, 1, 3});
  w.hadamard = rng() % 4 == 0;
  w.smooth_k = rng() % 4 == 0;
  c.engine = rng() % 2 == 0 ? Engine::cpu_reference : Engine::cpu_fast;
  c.q_lengths = random_lengths(rng, w.seq_q, ranks, 1);
  // MX V scales along the keys travel as given only from shards that start on a block.
  c.kv_lengths = random_lengths(rng, w.seq_k, ranks, v_keys ? kMxBlock : 1);
  return c;
}

bool same_bytes(const TensorView& want, const TensorView& got) {
  return want.bytes == got.bytes && std::memcmp(want.data, got.data, size_t(want.bytes)) == 0;
}

// Runs the case sharded on this rank and checks its rows of O and LSE bit for bit against the
// single-process run of the same engine on the gathered tensors (SPEC 8), and against the
// single-process run of `whole` where the engine's result per head cannot depend on the heads
// around it: always for the reference; for the fast engine when the KV heads split evenly, since it
// packs each GQA group into its tiles and a rank with replicated KV heads has smaller groups.
// `whole` holds the gathered tensors (for quantize-before-send, the whole tensors quantized in one
// process); `plain` is what the shards are cut from.
void expect_sharded_matches(const Case& c, const AttentionArgs& whole, const AttentionArgs& plain,
                            const std::string& trace) {
  SCOPED_TRACE(trace);
  dist::Communicator& comm = world();
  RunOptions options;
  options.engine = c.engine;
  options.threads = 1;
  const Status single = attention(whole, options);
  const std::vector<Shard> q_shards = dist::contiguous_shards(c.q_lengths);
  const std::vector<Shard> kv_shards = dist::contiguous_shards(c.kv_lengths);
  const Shard q_rows = q_shards[size_t(comm.rank())];
  dist::ShardStorage storage;
  AttentionArgs shard;
  ASSERT_TRUE(dist::slice_shard(plain, q_rows, kv_shards[size_t(comm.rank())], &storage, &shard));

  core::HostTensor gathered_o, gathered_lse;
  const Status local = dist::single_process_on_gathered(comm, shard, c.quantization, options,
                                                        &gathered_o, &gathered_lse);
  ASSERT_TRUE(local) << local.message();

  const Status sharded = dist::sharded_attention(comm, shard, options, c.quantization);
  EXPECT_TRUE(single) << single.message();
  ASSERT_TRUE(sharded) << sharded.message();
  EXPECT_TRUE(same_bytes(gathered_o.view(), shard.o))
      << "O differs from the run on the gathered tensors";
  if (whole.lse.given()) {
    EXPECT_TRUE(same_bytes(gathered_lse.view(), shard.lse))
        << "LSE differs from the run on the gathered tensors";
  }
  const bool head_invariant =
      c.engine == Engine::cpu_reference || c.config.heads_kv % comm.size() == 0;
  if (single && head_invariant) {
    EXPECT_TRUE(same_bytes(dist::token_rows(whole.o, q_rows).view(), shard.o))
        << "O differs from the whole run";
    if (whole.lse.given()) {
      EXPECT_TRUE(same_bytes(dist::lse_columns(whole.lse, q_rows).view(), shard.lse))
          << "LSE differs from the whole run";
    }
  }
}

TEST_F(ShardedAttention, MatchesTheSingleProcessRunBitwise) {
  constexpr uint64_t kCases = 40;
  int64_t run = 0;
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    const Case c = random_case(seed, world().size());
    workload::Workload w;
    if (!workload::Workload::build(c.config, &w)) continue;  // the same verdict on every rank
    ++run;
    expect_sharded_matches(c, w.args(), w.args(), c.describe(w));
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
  EXPECT_GT(run, kCases / 2);
}

// The whole problem quantized in one process, as quantize-before-send must reproduce it.
struct QuantizedWhole {
  core::HostTensor q, q_scales, k, k_scales, v, v_scales;
  AttentionArgs args;
};

Status quantize_whole(const AttentionArgs& plain, const dist::SendQuantization& sq,
                      VScaleAxis v_axis, QuantizedWhole* out) {
  out->args = plain;
  if (sq.q) {
    const TensorView& q = plain.q;
    out->q = core::HostTensor(*sq.q, {q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
    out->q_scales =
        core::HostTensor(DType::e8m0, {q.shape[0], q.shape[1], q.shape[2], q.shape[3] / kMxBlock});
    if (Status st = quantize(q, out->q.view(), out->q_scales.view(), 3, sq.mode); !st) return st;
    out->args.q = out->q.view();
    out->args.q_scales = out->q_scales.view();
  }
  const TensorView& k = plain.k;
  const TensorView& v = plain.v;
  const int64_t B = k.shape[0], Sk = k.shape[1], H = k.shape[2];
  out->k = core::HostTensor(*sq.k, {B, Sk, H, k.shape[3]});
  out->k_scales = core::HostTensor(DType::e8m0, {B, Sk, H, k.shape[3] / kMxBlock});
  if (Status st = quantize(k, out->k.view(), out->k_scales.view(), 3, sq.mode); !st) return st;
  out->v = core::HostTensor(*sq.v, {B, Sk, H, v.shape[3]});
  if (v_axis == VScaleAxis::keys) {
    out->v_scales =
        core::HostTensor(DType::e8m0, {B, H, (Sk + kMxBlock - 1) / kMxBlock, v.shape[3]});
    if (Status st =
            quantize(v, out->v.view(), permuted(out->v_scales.view(), {0, 2, 1, 3}), 1, sq.mode);
        !st) {
      return st;
    }
  } else {
    out->v_scales = core::HostTensor(DType::e8m0, {B, Sk, H, v.shape[3] / kMxBlock});
    if (Status st = quantize(v, out->v.view(), out->v_scales.view(), 3, sq.mode); !st) return st;
  }
  out->args.k = out->k.view();
  out->args.k_scales = out->k_scales.view();
  out->args.v = out->v.view();
  out->args.v_scales = out->v_scales.view();
  out->args.v_scale_axis = v_axis;
  return Status::ok();
}

// Plain K and V quantized by their senders; blocks of 32 keys straddle the uneven shards.
TEST_F(ShardedAttention, QuantizeBeforeSendMatchesQuantizingTheWholeTensor) {
  constexpr uint64_t kCases = 16;
  for (uint64_t seed = 100; seed < 100 + kCases; ++seed) {
    Case c = random_case(seed, world().size());
    std::mt19937_64 rng(seed);
    workload::Config& w = c.config;
    w.q_format = pick(rng, {DType::bf16, DType::f32});
    w.k_format = pick(rng, {DType::bf16, DType::f32});
    w.v_format = pick(rng, {DType::bf16, DType::f16});
    w.v_scale_axis = rng() % 3 == 0 ? VScaleAxis::head_dim : VScaleAxis::keys;
    c.kv_lengths = random_lengths(rng, w.seq_k, world().size(), 1);
    if (rng() % 2 == 0) c.quantization.q = pick(rng, {DType::e4m3, DType::e2m3});
    c.quantization.k = pick(rng, {DType::e4m3, DType::e2m1});
    c.quantization.v = pick(rng, {DType::e4m3, DType::e5m2, DType::e3m2, DType::e2m1});
    c.quantization.mode = w.scale_mode;
    workload::Workload plain;
    if (!workload::Workload::build(c.config, &plain)) continue;
    QuantizedWhole whole;
    ASSERT_TRUE(quantize_whole(plain.args(), c.quantization, w.v_scale_axis, &whole));
    AttentionArgs shards_from = plain.args();
    shards_from.v_scale_axis = w.v_scale_axis;
    expect_sharded_matches(c, whole.args, shards_from, c.describe(plain));
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
}

// The gathered tensors hold the whole tensors' bytes for the rank's heads (KV heads repeated as the
// local grouping needs), scales at logical size.
TEST_F(ShardedAttention, GatheredInputsAreTheWholeTensorsHeads) {
  constexpr uint64_t kCases = 12;
  for (uint64_t seed = 200; seed < 200 + kCases; ++seed) {
    Case c = random_case(seed, world().size());
    std::mt19937_64 rng(seed);
    c.config.v_format = pick(rng, {DType::e2m1, DType::e3m2});
    c.config.v_scale_axis = VScaleAxis::keys;
    c.kv_lengths = random_lengths(rng, c.config.seq_k, world().size(), kMxBlock);
    workload::Workload w;
    if (!workload::Workload::build(c.config, &w)) continue;
    SCOPED_TRACE(c.describe(w));
    const AttentionArgs& a = w.args();
    const std::vector<Shard> q_shards = dist::contiguous_shards(c.q_lengths);
    const std::vector<Shard> kv_shards = dist::contiguous_shards(c.kv_lengths);
    dist::ShardStorage storage;
    AttentionArgs shard;
    ASSERT_TRUE(dist::slice_shard(a, q_shards[size_t(world().rank())],
                                  kv_shards[size_t(world().rank())], &storage, &shard));
    dist::GatheredHeads gathered;
    const Status st = dist::gather_heads(world(), shard, {}, &gathered);
    ASSERT_TRUE(st) << st.message();
    const AttentionArgs& g = gathered.args();
    const int64_t B = c.config.batch, Sk = c.config.seq_k, Sq = c.config.seq_q;
    const int64_t local_kv = g.k.shape[2];
    // Token tensors: row (b, s) of local head j is row (b, s) of global head `global(j)`.
    const auto same_heads = [&](const TensorView& whole, const TensorView& local, int64_t rows,
                                auto global) {
      const int64_t unit = *contiguous_bytes(whole.dtype, whole.shape[3]);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < rows; ++s)
          for (int64_t j = 0; j < local.shape[2]; ++j) {
            const auto* want = static_cast<const std::byte*>(whole.data) +
                               ((b * rows + s) * whole.shape[2] + global(j)) * unit;
            const auto* got = static_cast<const std::byte*>(local.data) +
                              ((b * rows + s) * local.shape[2] + j) * unit;
            if (std::memcmp(want, got, size_t(unit)) != 0) return false;
          }
      return true;
    };
    const auto q_head = [&](int64_t i) { return gathered.first_q_head() + i; };
    const auto kv_head = [&](int64_t j) { return gathered.kv_head(j); };
    EXPECT_TRUE(same_heads(a.q, g.q, Sq, q_head)) << "Q";
    EXPECT_TRUE(same_heads(a.k, g.k, Sk, kv_head)) << "K";
    EXPECT_TRUE(same_heads(a.v, g.v, Sk, kv_head)) << "V";
    if (a.q_scales.given()) {
      EXPECT_TRUE(same_heads(a.q_scales, g.q_scales, Sq, q_head)) << "Q scales";
    }
    if (a.k_scales.given()) {
      EXPECT_TRUE(same_heads(a.k_scales, g.k_scales, Sk, kv_head)) << "K scales";
    }
    // V scales [B, Hkv, blocks, Dv]: exactly the logical size, and each local head's blocks.
    const int64_t blocks = (Sk + kMxBlock - 1) / kMxBlock, Dv = c.config.dim_v;
    EXPECT_EQ(g.v_scales.bytes, B * local_kv * blocks * Dv);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < local_kv; ++j) {
        const auto* want = static_cast<const std::byte*>(a.v_scales.data) +
                           (b * c.config.heads_kv + kv_head(j)) * blocks * Dv;
        const auto* got =
            static_cast<const std::byte*>(g.v_scales.data) + (b * local_kv + j) * blocks * Dv;
        EXPECT_EQ(std::memcmp(want, got, size_t(blocks * Dv)), 0) << "V scales of local head " << j;
      }
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
}

// Byte counts of the forward all-to-all: each rank sends every other its rows of that rank's heads;
// MX payloads (with their scales) are smaller than bf16.
TEST_F(ShardedAttention, CountsTheBytesEachAllToAllMoves) {
  const int ranks = world().size(), me = world().rank();
  workload::Config w;
  w.batch = 1;
  w.seq_q = w.seq_k = 96;
  w.heads_q = 12;
  w.heads_kv = 12;
  w.dim_qk = w.dim_v = 64;
  w.q_format = w.k_format = w.v_format = w.o_format = DType::bf16;
  std::vector<int64_t> bf16_bytes, mx_bytes;
  for (const DType kv : {DType::bf16, DType::e4m3}) {
    w.k_format = w.v_format = kv;
    workload::Workload problem;
    ASSERT_TRUE(workload::Workload::build(w, &problem));
    std::vector<int64_t> lengths(size_t(ranks), 96 / ranks);
    lengths.back() += 96 % ranks;
    const std::vector<Shard> shards = dist::contiguous_shards(lengths);
    dist::ShardStorage storage;
    AttentionArgs shard;
    ASSERT_TRUE(dist::slice_shard(problem.args(), shards[size_t(me)], shards[size_t(me)], &storage,
                                  &shard));
    dist::ShardedStats stats;
    RunOptions options;
    options.threads = 1;
    ASSERT_TRUE(dist::sharded_attention(world(), shard, options, {}, &stats));
    const int64_t rows = shards[size_t(me)].length, heads = 12 / ranks;
    const int64_t kv_row = kv == DType::bf16 ? 64 * 2 : 64 + 2;  // MX: codes and 2 scales
    const int64_t per_peer_heads = heads * (64 * 2 + 2 * kv_row);
    EXPECT_EQ(stats.forward.bytes_to_peers, rows * per_peer_heads * (ranks - 1));
    EXPECT_EQ(stats.forward.bytes_local, rows * per_peer_heads);
    // Back: every other rank's rows of this rank's heads, O in bf16 and the LSE.
    EXPECT_EQ(stats.reverse.bytes_to_peers, (96 - rows) * heads * (64 * 2 + 4));
    (kv == DType::bf16 ? bf16_bytes : mx_bytes).push_back(stats.forward.bytes_to_peers);
  }
  if (ranks > 1) {
    EXPECT_LT(mx_bytes[0], bf16_bytes[0]);
  }
}

// Rank `ranks - 1` of `ranks` holds nothing when there are more than two: 20 and 20 rows first.
std::vector<int64_t> forty_rows(int ranks) {
  std::vector<int64_t> lengths(size_t(ranks), 0);
  lengths[0] = ranks == 1 ? 40 : 20;
  if (ranks > 1) lengths[1] = 20;
  return lengths;
}

TEST_F(ShardedAttention, OneRanksBadShardFailsEveryRank) {
  const int me = world().rank();
  workload::Config w;
  w.seq_q = w.seq_k = 40;
  w.heads_q = 12;
  w.heads_kv = 4;
  w.dim_qk = w.dim_v = 32;
  workload::Workload problem;
  ASSERT_TRUE(workload::Workload::build(w, &problem));
  const Shard rows = dist::contiguous_shards(forty_rows(world().size()))[size_t(me)];
  dist::ShardStorage storage;
  AttentionArgs shard;
  ASSERT_TRUE(dist::slice_shard(problem.args(), rows, rows, &storage, &shard));
  const int culprit = world().size() - 1;
  if (me == culprit) shard.o.dtype = DType::i32;
  const Status st = dist::sharded_attention(world(), shard);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  std::string expected = "rank ";
  expected += std::to_string(culprit);
  expected += ": O shard must be";
  EXPECT_EQ(st.message().rfind(expected, 0), 0u) << st.message();

  if (me == culprit) shard.o.dtype = DType::bf16;
  RunOptions cuda;
  cuda.engine = Engine::cuda;
  EXPECT_EQ(dist::sharded_attention(world(), shard, cuda).code(), ErrorCode::unsupported);
}

TEST_F(ShardedAttention, MxVAlongKeysFromUnalignedShardsIsRefusedClearly) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  workload::Config w;
  w.seq_q = w.seq_k = 70;
  w.heads_q = 12;
  w.heads_kv = 2;
  w.dim_qk = w.dim_v = 32;
  w.v_format = DType::bf16;
  workload::Workload problem;
  ASSERT_TRUE(workload::Workload::build(w, &problem));
  // Rank 1's keys start at key 35, inside block 1; each rank quantized its own V along its keys.
  std::vector<int64_t> lengths(size_t(world().size()), 0);
  lengths[0] = 35;
  lengths[1] = 35;
  const Shard mine = dist::contiguous_shards(lengths)[size_t(world().rank())];
  dist::ShardStorage storage;
  AttentionArgs shard;
  ASSERT_TRUE(dist::slice_shard(problem.args(), mine, mine, &storage, &shard));
  core::HostTensor v(DType::e4m3, {1, mine.length, 2, 32});
  core::HostTensor v_scales(DType::e8m0, {1, 2, (mine.length + 31) / 32, 32});
  if (mine.length > 0) {
    ASSERT_TRUE(
        quantize(shard.v, v.view(), permuted(v_scales.view(), {0, 2, 1, 3}), 1, ScaleMode::floor));
  }
  shard.v = v.view();
  shard.v_scales = v_scales.view();
  shard.v_scale_axis = VScaleAxis::keys;
  const Status st = dist::sharded_attention(world(), shard);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.message().find("rank 1's starts at key 35"), std::string::npos) << st.message();
}

TEST_F(ShardedAttention, QueryHeadsMustSplitOverTheRanks) {
  if (world().size() < 3) GTEST_SKIP() << "needs three ranks";
  workload::Config w;
  w.seq_q = w.seq_k = 16;
  w.heads_q = 2;
  w.heads_kv = 1;
  w.dim_qk = w.dim_v = 32;
  workload::Workload problem;
  ASSERT_TRUE(workload::Workload::build(w, &problem));
  std::vector<int64_t> lengths(size_t(world().size()), 0);
  lengths[0] = 16;
  const Shard mine = dist::contiguous_shards(lengths)[size_t(world().rank())];
  dist::ShardStorage storage;
  AttentionArgs shard;
  ASSERT_TRUE(dist::slice_shard(problem.args(), mine, mine, &storage, &shard));
  const Status st = dist::sharded_attention(world(), shard);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(
      st.message().find("must be a multiple of the " + std::to_string(world().size()) + " ranks"),
      std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace mxattn::test
