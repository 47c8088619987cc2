// The MPI backend's collectives, including the all-to-all in several rounds of MPI_Alltoallw that
// segments past MPI's int counts take (forced here with a small per-call limit).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "dist/world.h"
#include "mxattn/dist.h"

namespace mxattn::test {
namespace {

class MpiCommunicator : public CollectiveTest {};

// Byte i of the message from rank `from` to rank `to`.
uint8_t message_byte(int from, int to, int64_t i) {
  return uint8_t(from * 31 + to * 7 + i * 13 + 1);
}

// Segment lengths of every pair, the same on every rank.
int64_t message_length(uint64_t seed, int from, int to) {
  std::mt19937_64 rng(seed * 1000 + uint64_t(from) * 37 + uint64_t(to));
  return int64_t(rng() % 300);
}

void expect_all_to_all_delivers(dist::Communicator& comm, uint64_t seed) {
  const int ranks = comm.size(), me = comm.rank();
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;
  int64_t send_total = 0, recv_total = 0;
  for (int p = 0; p < ranks; ++p) {
    send_counts.push_back(message_length(seed, me, p));
    // Gaps between segments: displacements need not be packed.
    send_displs.push_back(send_total + 3);
    send_total += send_counts.back() + 3;
    recv_counts.push_back(message_length(seed, p, me));
    recv_displs.push_back(recv_total + 5);
    recv_total += recv_counts.back() + 5;
  }
  std::vector<uint8_t> send(static_cast<size_t>(send_total));
  std::vector<uint8_t> recv(static_cast<size_t>(recv_total), 0);
  for (int p = 0; p < ranks; ++p)
    for (int64_t i = 0; i < send_counts[size_t(p)]; ++i)
      send[size_t(send_displs[size_t(p)] + i)] = message_byte(me, p, i);
  const Status st = comm.all_to_all(send.data(), send_counts.data(), send_displs.data(),
                                    recv.data(), recv_counts.data(), recv_displs.data());
  ASSERT_TRUE(st) << st.message();
  for (int p = 0; p < ranks; ++p)
    for (int64_t i = 0; i < recv_counts[size_t(p)]; ++i)
      ASSERT_EQ(recv[size_t(recv_displs[size_t(p)] + i)], message_byte(p, me, i))
          << "from rank " << p << ", byte " << i;
}

TEST_F(MpiCommunicator, AllToAllDeliversEverySegment) {
  for (uint64_t seed = 1; seed <= 4; ++seed) expect_all_to_all_delivers(world(), seed);
}

TEST_F(MpiCommunicator, AllToAllInRoundsDeliversEverySegment) {
  dist::MpiOptions options;
  options.max_bytes_per_call = 7;
  std::unique_ptr<dist::Communicator> small;
  ASSERT_TRUE(dist::make_mpi_communicator(options, &small));
  for (uint64_t seed = 1; seed <= 4; ++seed) expect_all_to_all_delivers(*small, seed);
}

TEST_F(MpiCommunicator, GathersAndReduces) {
  dist::Communicator& comm = world();
  const int64_t mine[2] = {comm.rank(), 100 + comm.rank()};
  std::vector<int64_t> all(size_t(2 * comm.size()));
  ASSERT_TRUE(comm.all_gather(mine, sizeof(mine), all.data()));
  for (int r = 0; r < comm.size(); ++r) {
    EXPECT_EQ(all[size_t(2 * r)], r);
    EXPECT_EQ(all[size_t(2 * r + 1)], 100 + r);
  }
  std::vector<float> values = {float(comm.rank()), -float(comm.rank()), 0.5f};
  ASSERT_TRUE(comm.all_reduce_max(values.data(), int64_t(values.size())));
  EXPECT_EQ(values[0], float(comm.size() - 1));
  EXPECT_EQ(values[1], 0.0f);
  EXPECT_EQ(values[2], 0.5f);
}

}  // namespace
}  // namespace mxattn::test
