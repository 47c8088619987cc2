#include "dist/exchange.h"

#include <chrono>
#include <numeric>

namespace mxattn::dist {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t message_bytes(const std::vector<Route>& routes, int from, int to) {
  int64_t bytes = 0;
  for (const Route& route : routes) {
    const Piece p = route.piece(from, to);
    bytes += box_bytes(route.source, p.seq_count, p.head_count);
  }
  return bytes;
}

std::vector<int64_t> offsets_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> displs(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), int64_t(0));
  return displs;
}

}  // namespace

Status Transfer::plan(Communicator& comm, const std::vector<Route>& routes, Transfer* out) {
  const int me = comm.rank(), ranks = comm.size();
  Transfer t;
  t.send_counts_.assign(size_t(ranks), 0);
  t.recv_counts_.assign(size_t(ranks), 0);
  for (int p = 0; p < ranks; ++p) {
    if (p == me) continue;
    t.send_counts_[size_t(p)] = message_bytes(routes, me, p);
    t.recv_counts_[size_t(p)] = message_bytes(routes, p, me);
  }
  t.send_displs_ = offsets_of(t.send_counts_);
  t.recv_displs_ = offsets_of(t.recv_counts_);
  const int64_t send_bytes = t.send_displs_.back() + t.send_counts_.back();
  const int64_t recv_bytes = t.recv_displs_.back() + t.recv_counts_.back();
  if (Status st = Buffer::allocate(comm, send_bytes, &t.send_); !st) return st;
  if (Status st = Buffer::allocate(comm, recv_bytes, &t.recv_); !st) return st;

  for (int p = 0; p < ranks; ++p) {
    std::byte* send_at = t.send_.data() + t.send_displs_[size_t(p)];
    std::byte* recv_at = t.recv_.data() + t.recv_displs_[size_t(p)];
    for (const Route& route : routes) {
      if (p == me) {
        // The rank's own part goes straight from its source to its target.
        const Piece piece = route.piece(me, me);
        for (const HeadRun& run : piece.runs) {
          append_box(&t.pack_, route.source,
                     {piece.source_at.seq, piece.source_at.head + run.received_first}, route.target,
                     {piece.target_seq, run.local_first}, piece.seq_count, run.count);
        }
        t.local_bytes_ += box_bytes(route.source, piece.seq_count, piece.head_count);
        continue;
      }
      const Piece out_piece = route.piece(me, p);
      const Grid outgoing =
          grid_like(route.source, send_at, out_piece.seq_count, out_piece.head_count);
      append_box(&t.pack_, route.source, out_piece.source_at, outgoing, {0, 0}, out_piece.seq_count,
                 out_piece.head_count);
      send_at += outgoing.bytes();

      const Piece in_piece = route.piece(p, me);
      const Grid incoming =
          grid_like(route.target, recv_at, in_piece.seq_count, in_piece.head_count);
      for (const HeadRun& run : in_piece.runs) {
        append_box(&t.unpack_, incoming, {0, run.received_first}, route.target,
                   {in_piece.target_seq, run.local_first}, in_piece.seq_count, run.count);
      }
      recv_at += incoming.bytes();
    }
  }
  *out = std::move(t);
  return Status::ok();
}

Status Transfer::run(Communicator& comm, ExchangeStats* stats) const {
  auto start = std::chrono::steady_clock::now();
  if (Status st = comm.copy_2d(pack_.data(), int64_t(pack_.size())); !st) return st;
  if (Status st = comm.synchronize(); !st) return st;
  stats->pack_seconds += seconds_since(start);

  start = std::chrono::steady_clock::now();
  if (Status st = comm.all_to_all(send_.data(), send_counts_.data(), send_displs_.data(),
                                  recv_.data(), recv_counts_.data(), recv_displs_.data());
      !st) {
    return st;
  }
  if (Status st = comm.synchronize(); !st) return st;
  stats->wire_seconds += seconds_since(start);

  start = std::chrono::steady_clock::now();
  if (Status st = comm.copy_2d(unpack_.data(), int64_t(unpack_.size())); !st) return st;
  if (Status st = comm.synchronize(); !st) return st;
  stats->unpack_seconds += seconds_since(start);

  stats->bytes_to_peers += std::accumulate(send_counts_.begin(), send_counts_.end(), int64_t(0));
  stats->bytes_from_peers += std::accumulate(recv_counts_.begin(), recv_counts_.end(), int64_t(0));
  stats->bytes_local += local_bytes_;
  return Status::ok();
}

}  // namespace mxattn::dist
