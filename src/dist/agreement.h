// Before any data moves, every rank checks its own shard and states its sizes and choices; the
// statements are gathered, so every rank reaches the same verdict: go on, or fail with the same
// message. Nobody is left waiting in an all-to-all that another rank refused.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/layout.h"
#include "mxattn/dist.h"

namespace mxattn::dist {

inline constexpr int kVerdictChars = 320;

// One rank's verdict: ok, or its error's code and message (cut to fit).
struct Verdict {
  int64_t code = 0;  // ErrorCode
  char message[kVerdictChars] = {};

  static Verdict of(const Status& status);
  Status status() const;
};

// What a rank states about its shard. All fields but the verdict and the two lengths must be the
// same on every rank.
struct ShardRecord {
  Verdict verdict;
  int64_t q_rows = 0;
  int64_t kv_rows = 0;
  int64_t batch = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t dim_qk = 0;
  int64_t dim_v = 0;
  int64_t q_type = 0;  // DType on the wire (after quantize-before-send)
  int64_t k_type = 0;
  int64_t v_type = 0;
  int64_t o_type = 0;
  int64_t q_quantized = 0;  // quantized by the sender
  int64_t k_quantized = 0;
  int64_t v_quantized = 0;
  int64_t scale_mode = 0;
  int64_t v_axis = 0;
  int64_t lse = 0;
  int64_t k_mean = 0;
  int64_t sparse = 0;
  int64_t causal = 0;
  int64_t window = 0;
  int64_t softmax_scale_bits = -1;  // bits of AttentionArgs::scale, -1 when defaulted
  int64_t split_kv = 0;
  int64_t tile_m = 0;
  int64_t tile_n = 0;
  int64_t early_exit = 0;
};

// Checks this rank's shard (everything that needs no other rank) and fills its record. `extra` is
// a further local verdict of the caller's (e.g. about its engine), reported the same way.
ShardRecord describe_shard(const Communicator& comm, const AttentionArgs& shard,
                           const SendQuantization& quantization, const Status& extra);

// The layout every rank derives from the gathered records.
struct Geometry {
  int ranks = 1;
  int rank = 0;
  ShardRecord common;  // the agreed fields (rank 0's record)
  std::vector<Shard> q_shards;
  std::vector<Shard> kv_shards;

  DType q_type() const { return DType(common.q_type); }
  DType k_type() const { return DType(common.k_type); }
  DType v_type() const { return DType(common.v_type); }
  DType o_type() const { return DType(common.o_type); }
  bool v_along_keys() const {
    return is_mx(v_type()) && VScaleAxis(common.v_axis) == VScaleAxis::keys;
  }
  int64_t seq_q() const { return q_shards.back().end(); }
  int64_t seq_k() const { return kv_shards.back().end(); }
  HeadSlice heads(int r) const { return head_slice(common.heads_q, common.heads_kv, ranks, r); }
};

// Gathers every rank's record. Fails on every rank alike when one failed its checks (with that
// rank's message), when the ranks disagree, or when the shards break a rule that involves several
// ranks; otherwise fills `geometry`.
Status agree_on_shards(Communicator& comm, const ShardRecord& mine, Geometry* geometry);

// Gathers every rank's verdict on a later local step: ok everywhere, or the first failure, on
// every rank.
Status agree_on(Communicator& comm, const Status& mine);

}  // namespace mxattn::dist
