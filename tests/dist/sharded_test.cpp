// Sequence-parallel attention under mpirun (spec §8): every rank builds the same whole problem from
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

#include "base/host_tensor.h"
#include "dist/cases.h"
#include "dist/layout.h"
#include "dist/slice.h"
#include "dist/staged_communicator.h"
#include "dist/world.h"
#include "mxattn/dist.h"
#include "mxattn/mx.h"
#include "workload/problem.h"

namespace mxattn::test {
namespace {

using dist::Shard;

class ShardedAttention : public CollectiveTest {};

// Runs the case sharded on this rank and checks its rows of O and LSE bit for bit against the
// single-process run of the same engine on the gathered tensors (spec §8), and against the
// single-process run of `whole` where the engine's result per head cannot depend on the heads
// around it: always for the reference; for the fast engine when the KV heads split evenly, since it
// packs each GQA group into its tiles and a rank with replicated KV heads has smaller groups.
// `whole` holds the gathered tensors (for quantize-before-send, the whole tensors quantized in one
// process); `plain` is what the shards are cut from. The shard goes to `comm`'s memory and back.
void expect_sharded_matches(dist::Communicator& comm, const Case& c, const AttentionArgs& whole,
                            const AttentionArgs& plain, const std::string& trace) {
  SCOPED_TRACE(trace);
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

  dist::PlacedShard placed;
  ASSERT_TRUE(placed.place(comm, shard));

  base::HostTensor gathered_o, gathered_lse;
  const Status local = dist::single_process_on_gathered(comm, placed.args(), c.quantization,
                                                        options, &gathered_o, &gathered_lse);
  ASSERT_TRUE(local) << local.message();

  Status sharded = dist::sharded_attention(comm, placed.args(), options, c.quantization);
  if (sharded) sharded = placed.fetch_outputs(comm, shard);
  EXPECT_TRUE(single) << single.message();
  ASSERT_TRUE(sharded) << sharded.message();
  EXPECT_TRUE(same_bytes(gathered_o.view(), shard.o))
      << "O differs from the run on the gathered tensors";
  if (whole.lse.given()) {
    EXPECT_TRUE(same_bytes(gathered_lse.view(), shard.lse))
        << "LSE differs from the run on the gathered tensors";
  }
  const bool head_invariant =
      c.engine == Engine::cpu_reference || c.spec.heads_kv % comm.size() == 0;
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
  constexpr uint64_t kCases = 60;
  int64_t run = 0;
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    const Case c = random_case(seed, world().size());
    workload::Problem w;
    if (!workload::Problem::build(c.spec, &w)) continue;  // the same verdict on every rank
    ++run;
    expect_sharded_matches(world(), c, w.args(), w.args(), c.describe(w));
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
  EXPECT_GT(run, kCases / 2);
}

// Plain K and V quantized by their senders; blocks of 32 keys straddle the uneven shards.
TEST_F(ShardedAttention, QuantizeBeforeSendMatchesQuantizingTheWholeTensor) {
  constexpr uint64_t kCases = 16;
  for (uint64_t seed = 100; seed < 100 + kCases; ++seed) {
    const Case c = quantize_on_send_case(seed, world().size());
    workload::Problem plain;
    if (!workload::Problem::build(c.spec, &plain)) continue;
    QuantizedWhole whole;
    ASSERT_TRUE(quantize_whole(plain.args(), c, &whole));
    expect_sharded_matches(world(), c, whole.args, whole.plain, c.describe(plain));
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
}

// The GPU path (shards in device memory: staged to the host to quantize, attention on host copies,
// outputs copied back), on host memory that the communicator calls device memory.
TEST_F(ShardedAttention, GpuMemoryPathMatchesTheSingleProcessRun) {
  StagedCommunicator staged(world());
  for (uint64_t seed = 300; seed < 312; ++seed) {
    const bool quantized = seed % 2 == 0;
    const Case c =
        quantized ? quantize_on_send_case(seed, staged.size()) : random_case(seed, staged.size());
    workload::Problem w;
    if (!workload::Problem::build(c.spec, &w)) continue;
    QuantizedWhole whole;
    if (quantized) {
      ASSERT_TRUE(quantize_whole(w.args(), c, &whole));
    } else {
      whole.args = whole.plain = w.args();
    }
    expect_sharded_matches(staged, c, whole.args, whole.plain, c.describe(w));
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
  EXPECT_GT(staged.staged_copies(), 0);
}

// The gathered tensors hold the whole tensors' bytes for the rank's heads (KV heads repeated as the
// local grouping needs), scales at logical size: MX V along the keys as stored, and quantized by
// the senders, whose codes and scales are those of quantizing the whole tensor.
TEST_F(ShardedAttention, GatheredInputsAreTheWholeTensorsHeads) {
  constexpr uint64_t kCases = 16;
  for (uint64_t seed = 200; seed < 200 + kCases; ++seed) {
    const bool quantized = seed % 2 == 0;
    const Case c = quantized ? quantize_on_send_case(seed, world().size())
                             : mx_v_along_keys_case(seed, world().size());
    workload::Problem w;
    if (!workload::Problem::build(c.spec, &w)) continue;
    SCOPED_TRACE(c.describe(w));
    QuantizedWhole whole;
    if (quantized) {
      ASSERT_TRUE(quantize_whole(w.args(), c, &whole));
    } else {
      whole.args = whole.plain = w.args();
    }
    const int me = world().rank();
    dist::ShardStorage storage;
    AttentionArgs shard;
    ASSERT_TRUE(dist::slice_shard(whole.plain, dist::contiguous_shards(c.q_lengths)[size_t(me)],
                                  dist::contiguous_shards(c.kv_lengths)[size_t(me)], &storage,
                                  &shard));
    dist::GatheredHeads gathered;
    const Status st = dist::gather_heads(world(), shard, c.quantization, &gathered);
    ASSERT_TRUE(st) << st.message();
    EXPECT_TRUE(gathered_holds_whole_heads(whole.args, gathered.args(), gathered));
    if (!all_ranks(!::testing::Test::HasFailure())) break;
  }
}

// Byte counts of the forward all-to-all: each rank sends every other its rows of that rank's heads;
// MX payloads (with their scales) are smaller than bf16.
TEST_F(ShardedAttention, CountsTheBytesEachAllToAllMoves) {
  const int ranks = world().size(), me = world().rank();
  workload::Spec w = workload::decode_step();
  w.batch = 1;
  w.seq_q = w.seq_k = 96;
  w.heads_q = 12;
  w.heads_kv = 12;
  w.dim_qk = w.dim_v = 64;
  w.q_type = w.k_type = w.v_type = w.o_type = DType::bf16;
  std::vector<int64_t> bf16_bytes, mx_bytes;
  for (const DType kv : {DType::bf16, DType::e4m3}) {
    w.k_type = w.v_type = kv;
    workload::Problem problem;
    ASSERT_TRUE(workload::Problem::build(w, &problem));
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
  workload::Spec w = workload::decode_step();
  w.seq_q = w.seq_k = 40;
  w.heads_q = 12;
  w.heads_kv = 4;
  w.dim_qk = w.dim_v = 32;
  workload::Problem problem;
  ASSERT_TRUE(workload::Problem::build(w, &problem));
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
  workload::Spec w = workload::decode_step();
  w.seq_q = w.seq_k = 70;
  w.heads_q = 12;
  w.heads_kv = 2;
  w.dim_qk = w.dim_v = 32;
  w.v_type = DType::bf16;
  workload::Problem problem;
  ASSERT_TRUE(workload::Problem::build(w, &problem));
  // Rank 1's keys start at key 35, inside block 1; each rank quantized its own V along its keys.
  std::vector<int64_t> lengths(size_t(world().size()), 0);
  lengths[0] = 35;
  lengths[1] = 35;
  const Shard mine = dist::contiguous_shards(lengths)[size_t(world().rank())];
  dist::ShardStorage storage;
  AttentionArgs shard;
  ASSERT_TRUE(dist::slice_shard(problem.args(), mine, mine, &storage, &shard));
  base::HostTensor v(DType::e4m3, {1, mine.length, 2, 32});
  base::HostTensor v_scales(DType::e8m0, {1, 2, (mine.length + 31) / 32, 32});
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
  workload::Spec w = workload::decode_step();
  w.seq_q = w.seq_k = 16;
  w.heads_q = 2;
  w.heads_kv = 1;
  w.dim_qk = w.dim_v = 32;
  workload::Problem problem;
  ASSERT_TRUE(workload::Problem::build(w, &problem));
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
