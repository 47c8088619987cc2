#include "dist/report.h"

#include <algorithm>
#include <chrono>
#include <type_traits>

namespace mxattn::dist {

namespace {

Status barrier(Communicator& comm) {
  float nothing = 0;
  return comm.all_reduce_max(&nothing, 1);
}

}  // namespace

Status measure_sharded_attention(Communicator& comm, const AttentionArgs& shard,
                                 const RunOptions& options, const SendQuantization& quantization,
                                 ShardedStats* stats) {
  *stats = ShardedStats{};
  GatheredHeads gathered;
  if (Status st = barrier(comm); !st) return st;
  if (Status st = gather_heads(comm, shard, quantization, &gathered, &stats->forward); !st) {
    return st;
  }
  const auto start = std::chrono::steady_clock::now();
  if (Status st = run_local_attention(comm, gathered, options, &stats->attention_engine); !st) {
    return st;
  }
  stats->attention_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (Status st = barrier(comm); !st) return st;
  if (Status st = scatter_sequence(comm, gathered, &stats->reverse); !st) return st;
  stats->total_seconds =
      stats->forward.seconds() + stats->attention_seconds + stats->reverse.seconds();
  return Status::ok();
}

Status gather_stats(Communicator& comm, const ShardedStats& mine, std::vector<ShardedStats>* all) {
  static_assert(std::is_trivially_copyable_v<ShardedStats>);
  all->assign(size_t(comm.size()), ShardedStats{});
  return comm.all_gather(&mine, sizeof(ShardedStats), all->data());
}

AllToAllSummary summarize(const std::vector<ShardedStats>& ranks, bool forward) {
  AllToAllSummary s;
  double slowest_total = 0;
  for (const ShardedStats& r : ranks) {
    const ExchangeStats& e = forward ? r.forward : r.reverse;
    s.bytes += e.bytes_to_peers;
    s.wire_seconds = std::max(s.wire_seconds, e.wire_seconds);
    s.seconds = std::max(s.seconds, e.seconds());
    slowest_total = std::max(slowest_total, r.total_seconds);
  }
  if (s.wire_seconds > 0 && !ranks.empty()) {
    s.bus_bytes_per_second = double(s.bytes) / double(ranks.size()) / s.wire_seconds;
  }
  if (slowest_total > 0) s.share = s.seconds / slowest_total;
  return s;
}

}  // namespace mxattn::dist
