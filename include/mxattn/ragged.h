// Ragged batches (spec §10): sequences with different numbers of query rows (prefill chunks beside
// one-row decodes) over one dense or paged KV cache, in one call, as serving engines call
// attention (vLLM's query_start_loc and seq_lens).
#pragma once

#include "mxattn/attention.h"

namespace mxattn {

struct RaggedArgs {
  // Q packed by sequence: sequence b owns rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]).
  TensorView q;             // [total_q, Hq, Dqk]
  TensorView q_scales;      // MX Q: e8m0 [total_q, Hq, Dqk / 32]
  TensorView cu_seqlens_q;  // int32 [B + 1]: 0, monotone, total_q last
  TensorView seq_lens;      // int32 [B]: each sequence's keys (its kv_len), 0 .. Sk
  // K and V as AttentionArgs takes them: dense [B, Sk, Hkv, D], or paged pools with `paged`.
  TensorView k;
  TensorView v;
  TensorView k_scales;
  TensorView v_scales;
  VScaleAxis v_scale_axis = VScaleAxis::head_dim;
  PagedKv paged;
  TensorView o;    // [total_q, Hq, Dv], f32, f16 or bf16
  TensorView lse;  // optional f32 [Hq, total_q] (FlashAttention's varlen layout), natural log
  // Masks per sequence with its local row index and Sq = its query rows (spec §10): bottom_right
  // makes a chunk's last row see the sequence's last key.
  Causal causal = Causal::none;
  TensorView prefix_offset;  // int32 [B], with Causal::prefix
  int64_t window = -1;
  std::optional<float> scale;
  TensorView k_mean;  // optional f32 [B, Hkv, Dqk]
  // split_kv, tiles and the auto target; the partial outputs are not taken here.
  SplitOptions split;
};

// Validates every sequence's problem (nothing is written before all pass; messages name the
// sequence), then runs each on the engine `options` chooses. A sequence's result is, bitwise, that
// of one padded call with its rows, keys and masks alone (its partition depends on nothing else);
// sequences with no query row write nothing. The metadata (cu_seqlens_q, seq_lens, prefix_offset,
// block table) is read on the host. The CPU engines run ragged calls; a GPU run of a ragged batch
// goes through the batch plan.
Status attention(const RaggedArgs& args, const RunOptions& options = {});

}  // namespace mxattn
