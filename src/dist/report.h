// Per-rank costs of sharded runs gathered in one place, and the figures the command line and the
// benchmark print: bytes each all-to-all moved, its bus bandwidth, its share of the time.
#pragma once

#include <vector>

#include "mxattn/dist.h"

namespace mxattn::dist {

// sharded_attention's three steps with the ranks synchronized before each all-to-all, so that an
// all-to-all's time is its own and not a wait for the slowest rank's attention. Total time is the
// sum of the steps. For measuring; collective.
Status measure_sharded_attention(Communicator& comm, const AttentionArgs& shard,
                                 const RunOptions& options, const SendQuantization& quantization,
                                 ShardedStats* stats);

// Every rank's stats, in rank order, on every rank. Collective.
Status gather_stats(Communicator& comm, const ShardedStats& mine, std::vector<ShardedStats>* all);

struct AllToAllSummary {
  int64_t bytes = 0;        // sent to peers, summed over the ranks
  double wire_seconds = 0;  // the slowest rank's collective
  double seconds = 0;       // the slowest rank's whole exchange (quantize, pack, wire, unpack)
  double bus_bytes_per_second = 0;  // bytes per rank on the wire over the slowest collective
  double share = 0;                 // of the slowest rank's total time
};

// nccl-tests' bus bandwidth for an all-to-all: (S (n-1)/n) / t, S a rank's whole send, t the
// slowest rank's time; with uneven shards, S (n-1)/n is the mean of the bytes sent to peers.
AllToAllSummary summarize(const std::vector<ShardedStats>& ranks, bool forward);

}  // namespace mxattn::dist
