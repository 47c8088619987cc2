// The NCCL backend on one GPU, end to end: its collectives and device memory, then
// sequence-parallel attention with the shard in GPU memory (one rank: the gathered tensors are the
// whole problem), bit for bit against the single-process run on the host.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/host_tensor.h"
#include "dist/cases.h"
#include "dist/slice.h"
#include "mxattn/dist.h"

namespace mxattn::test {
namespace {

std::unique_ptr<dist::Communicator> one_gpu() {
  dist::NcclRanks ranks;
  std::unique_ptr<dist::Communicator> comm;
  if (!dist::make_nccl_unique_id(&ranks.id)) return nullptr;
  if (!dist::make_nccl_communicator(ranks, &comm)) return nullptr;
  return comm;
}

TEST(NcclCommunicator, OneRankCollectivesAndDeviceMemory) {
  const std::unique_ptr<dist::Communicator> comm = one_gpu();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend(), dist::Backend::nccl);
  EXPECT_EQ(comm->memory(), dist::MemorySpace::cuda);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);

  const int64_t mine[2] = {7, -3};
  int64_t all[2] = {};
  ASSERT_TRUE(comm->all_gather(mine, sizeof(mine), all));
  EXPECT_EQ(all[0], 7);
  EXPECT_EQ(all[1], -3);
  float values[3] = {1.5f, -2.0f, 0.0f};
  ASSERT_TRUE(comm->all_reduce_max(values, 3));
  EXPECT_EQ(values[1], -2.0f);

  // The all-to-all to itself, at an offset, through device buffers; then a 2D copy on the device.
  constexpr int64_t kBytes = 1000, kOffset = 24;
  std::vector<uint8_t> host(kBytes), back(kBytes + kOffset, 0);
  for (int64_t i = 0; i < kBytes; ++i) host[size_t(i)] = uint8_t(i * 37 + 11);
  void *send = nullptr, *recv = nullptr;
  ASSERT_TRUE(comm->allocate(kBytes, &send));
  ASSERT_TRUE(comm->allocate(kBytes + kOffset, &recv));
  ASSERT_TRUE(comm->copy_from_host(send, host.data(), kBytes));
  const int64_t count = kBytes, zero = 0, offset = kOffset;
  ASSERT_TRUE(comm->all_to_all(send, &count, &zero, recv, &count, &offset));
  ASSERT_TRUE(comm->synchronize());
  ASSERT_TRUE(comm->copy_to_host(back.data(), recv, kBytes + kOffset));
  EXPECT_EQ(std::memcmp(back.data() + kOffset, host.data(), kBytes), 0);

  // Rows of 10 bytes, 25 apart, into rows 10 apart.
  const dist::Copy2D rows{send, 25, recv, 10, 10, 40};
  ASSERT_TRUE(comm->copy_2d(&rows, 1));
  ASSERT_TRUE(comm->copy_to_host(back.data(), recv, 400));
  for (int64_t r = 0; r < 40; ++r) {
    EXPECT_EQ(std::memcmp(back.data() + r * 10, host.data() + r * 25, 10), 0) << "row " << r;
  }
  comm->deallocate(send);
  comm->deallocate(recv);
}

// Runs `c` with its one shard in GPU memory and compares O and LSE with `whole` run on the host.
void expect_one_gpu_matches(dist::Communicator& comm, const Case& c, const AttentionArgs& whole,
                            const AttentionArgs& plain) {
  RunOptions options;
  options.engine = c.engine;
  ASSERT_TRUE(attention(whole, options));
  const dist::Shard all_q{0, whole.q.shape[1]}, all_kv{0, whole.k.shape[1]};
  dist::ShardStorage storage;
  AttentionArgs shard;
  ASSERT_TRUE(dist::slice_shard(plain, all_q, all_kv, &storage, &shard));
  dist::PlacedShard placed;
  ASSERT_TRUE(placed.place(comm, shard));
  const Status st = dist::sharded_attention(comm, placed.args(), options, c.quantization);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(placed.fetch_outputs(comm, shard));
  EXPECT_TRUE(same_bytes(whole.o, shard.o)) << "O differs";
  if (whole.lse.given()) {
    EXPECT_TRUE(same_bytes(whole.lse, shard.lse)) << "LSE differs";
  }
}

TEST(NcclShardedAttention, OneGpuMatchesTheSingleProcessRun) {
  const std::unique_ptr<dist::Communicator> comm = one_gpu();
  ASSERT_NE(comm, nullptr);
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const Case c = random_case(seed, 1);
    workload::Problem w;
    if (!workload::Problem::build(c.spec, &w)) continue;
    SCOPED_TRACE(c.describe(w));
    expect_one_gpu_matches(*comm, c, w.args(), w.args());
  }
}

TEST(NcclShardedAttention, OneGpuQuantizeBeforeSendMatchesQuantizingTheWholeTensor) {
  const std::unique_ptr<dist::Communicator> comm = one_gpu();
  ASSERT_NE(comm, nullptr);
  for (uint64_t seed = 100; seed < 106; ++seed) {
    const Case c = quantize_on_send_case(seed, 1);
    workload::Problem w;
    if (!workload::Problem::build(c.spec, &w)) continue;
    SCOPED_TRACE(c.describe(w));
    QuantizedWhole whole;
    ASSERT_TRUE(quantize_whole(w.args(), c, &whole));
    expect_one_gpu_matches(*comm, c, whole.args, whole.plain);
  }
}

// The CUDA engine on the gathered tensors in GPU memory, against its own single-process run there;
// and Engine::automatic, which takes the CUDA engine where it supports the problem.
TEST(NcclShardedAttention, OneGpuCudaEngineMatchesItsSingleProcessRun) {
#if !defined(MXATTN_WITH_CUDA)
  GTEST_SKIP() << "this build has no CUDA engine (MXATTN_CUDA=OFF)";
#endif
  const std::unique_ptr<dist::Communicator> comm = one_gpu();
  ASSERT_NE(comm, nullptr);
  for (const Engine engine : {Engine::cuda, Engine::automatic}) {
    workload::Spec c = workload::decode_step();
    c.seq_q = c.seq_k = 200;
    c.heads_q = 8;
    c.heads_kv = 2;
    c.dim_qk = c.dim_v = 128;
    c.q_type = DType::bf16;
    c.k_type = c.v_type = DType::e4m3;
    c.causal = Causal::bottom_right;
    workload::Problem w;
    ASSERT_TRUE(workload::Problem::build(c, &w));
    dist::PlacedShard whole;
    ASSERT_TRUE(whole.place(*comm, w.args()));
    RunOptions single;
    single.engine = Engine::cuda;
    single.stream = comm->stream();
    const Status ran = attention(whole.args(), single);
    ASSERT_TRUE(ran) << ran.message();
    ASSERT_TRUE(whole.fetch_outputs(*comm, w.args()));

    dist::ShardStorage storage;
    AttentionArgs shard;
    ASSERT_TRUE(dist::slice_shard(w.args(), {0, c.seq_q}, {0, c.seq_k}, &storage, &shard));
    dist::PlacedShard placed;
    ASSERT_TRUE(placed.place(*comm, shard));
    RunOptions options;
    options.engine = engine;
    dist::ShardedStats stats;
    const Status st = dist::sharded_attention(*comm, placed.args(), options, {}, &stats);
    ASSERT_TRUE(st) << st.message();
    EXPECT_EQ(stats.attention_engine, Engine::cuda);
    ASSERT_TRUE(placed.fetch_outputs(*comm, shard));
    EXPECT_TRUE(same_bytes(w.args().o, shard.o)) << "O differs";
    EXPECT_TRUE(same_bytes(w.args().lse, shard.lse)) << "LSE differs";
  }
}

}  // namespace
}  // namespace mxattn::test
