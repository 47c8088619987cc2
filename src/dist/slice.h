// Cutting a whole problem that every rank holds (built from the same seed, say) into one rank's
// shard, and the rank's rows out of a whole output: for the tests, the command line and the
// benchmarks, which compare a sharded run with the single-process one.
#pragma once

#include <vector>

#include "base/host_tensor.h"
#include "dist/buffer.h"
#include "dist/layout.h"
#include "mxattn/attention.h"
#include "mxattn/dist.h"

namespace mxattn::dist {

struct ShardStorage {
  base::HostTensor q, q_scales, k, k_scales, v, v_scales, o, lse;
};

// Rows `q_rows` of Q and O (columns of LSE) and `kv_rows` of K and V of `whole` (dense,
// contiguous), with their scales; V scales along the keys take the shard's blocks, so a non-empty
// key shard must start at a multiple of 32. The outputs are filled with NaN. Options, metadata and
// k_mean are `whole`'s.
Status slice_shard(const AttentionArgs& whole, const Shard& q_rows, const Shard& kv_rows,
                   ShardStorage* storage, AttentionArgs* shard);

// Rows of a contiguous [B, S, H, D] tensor.
base::HostTensor token_rows(const TensorView& whole, const Shard& rows);

// Columns of a contiguous [B, H, S] tensor (LSE).
base::HostTensor lse_columns(const TensorView& whole, const Shard& columns);

// What spec §8 promises a rank's sharded run returns: the single-process run of the same engine on
// every rank's gathered tensors, the ranks' heads put side by side, cut to this rank's rows (O) and
// columns (LSE; empty when the shard has none). `placed` is the shard in the communicator's memory.
// Collective.
Status single_process_on_gathered(Communicator& comm, const AttentionArgs& placed,
                                  const SendQuantization& quantization, const RunOptions& options,
                                  base::HostTensor* o_rows, base::HostTensor* lse_rows);

// A host shard in a communicator's memory: the same views for host memory, copies on the GPU
// otherwise (the tensors that travel and k_mean; metadata stays on the host).
class PlacedShard {
 public:
  Status place(Communicator& comm, const AttentionArgs& host_shard);
  const AttentionArgs& args() const { return args_; }
  // Copies the placed O (and LSE) into `host_shard`'s.
  Status fetch_outputs(Communicator& comm, const AttentionArgs& host_shard) const;

 private:
  std::vector<Buffer> buffers_;
  AttentionArgs args_;
};

}  // namespace mxattn::dist
