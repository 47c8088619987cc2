// What GatheredHeads holds: the rank's layout, its whole-sequence inputs and local outputs in the
// communicator's memory, and where the reverse all-to-all writes.
#pragma once

#include <memory>
#include <utility>

#include "dist/agreement.h"
#include "dist/buffer.h"
#include "dist/layout.h"
#include "mxattn/dist.h"

namespace mxattn::dist {

struct GatheredHeads::Impl {
  Communicator* comm = nullptr;
  Geometry geometry;
  HeadSlice heads;
  Buffer q, q_scales, k, k_scales, v, v_scales, k_mean, o, lse;
  AttentionArgs args;    // the local problem, over the buffers above
  TensorView shard_o;    // the caller's O shard
  TensorView shard_lse;  // and LSE shard (optional)

  static void install(GatheredHeads* gathered, std::unique_ptr<Impl> impl) {
    gathered->impl_ = std::move(impl);
  }
};

}  // namespace mxattn::dist
