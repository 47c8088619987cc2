// Quantize-before-send: the sender turns a plain-float shard into MX codes and scales, so the
// all-to-all moves 4-9 bits per element instead of 16 or 32. The codes are those of quantizing the
// whole gathered tensor in one process: Q, K and V along the head dim block within one token; V
// along the keys blocks 32 keys, and where such a block holds keys of several ranks, the ranks
// first agree on its largest magnitude (an all-reduce max), which is all its scale depends on.
#pragma once

#include "dist/agreement.h"
#include "dist/buffer.h"
#include "mxattn/attention.h"
#include "mxattn/dist.h"

namespace mxattn::dist {

// The shard's Q, K, V and scales as they travel: the caller's views, or quantized copies owned
// here. V scales along the keys are [B, Hkv, carried blocks, Dv]: the blocks whose first key is in
// this rank's shard (layout.h's carried_key_blocks).
struct TravellingShard {
  TensorView q, q_scales, k, k_scales, v, v_scales;
  Buffer storage[6];
};

// Collective when V is quantized along the keys (every rank calls it, in the same order).
Status prepare_travelling_shard(Communicator& comm, const Geometry& geometry,
                                const AttentionArgs& shard, const SendQuantization& quantization,
                                TravellingShard* out);

}  // namespace mxattn::dist
