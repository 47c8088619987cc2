// One all-to-all of several tensors: which box of each tensor goes from which rank to which, the
// byte counts every rank derives alike, and the copies that pack, unpack, and move the rank's own
// part in place (it never enters the collective).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dist/buffer.h"
#include "dist/grid.h"
#include "dist/layout.h"
#include "mxattn/dist.h"

namespace mxattn::dist {

// The box of one tensor that rank `from` sends rank `to`: seq_count x head_count at `source_at` in
// the sender's tensor; it lands at sequence row `target_seq` of the receiver's tensor, its heads
// spread by `runs` (received_first: head within the box; local_first: head in the target).
struct Piece {
  Box source_at;
  int64_t seq_count = 0;
  int64_t head_count = 0;
  int64_t target_seq = 0;
  std::vector<HeadRun> runs;
};

// A tensor that travels: this rank's source and target grids (same orientation and unit), and the
// piece every pair of ranks exchanges.
struct Route {
  Grid source;
  Grid target;
  std::function<Piece(int from, int to)> piece;
};

class Transfer {
 public:
  // Sizes the message of every pair, allocates the buffers and builds the copies.
  static Status plan(Communicator& comm, const std::vector<Route>& routes, Transfer* out);

  // Pack (and the local part), the all-to-all, unpack; timed into `stats`.
  Status run(Communicator& comm, ExchangeStats* stats) const;

 private:
  std::vector<int64_t> send_counts_, send_displs_, recv_counts_, recv_displs_;
  Buffer send_, recv_;
  std::vector<Copy2D> pack_, unpack_;
  int64_t local_bytes_ = 0;
};

}  // namespace mxattn::dist
