// spec §3's NaN-safe f32 combine of split-KV partials, as a function of its own.
#pragma once

#include "mxattn/attention.h"

namespace mxattn {

struct CombineArgs {
  TensorView partial_o;    // [S, B, Sq, Hq, Dv], f32, f16 or bf16
  TensorView partial_lse;  // f32 [S, B, Hq, Sq], natural log
  TensorView counts;       // int32 [B, Hq, Sq]: splits to read per row (exact or conservative)
  TensorView o;            // [B, Sq, Hq, Dv], f32, f16 or bf16
  TensorView lse;          // optional f32 [B, Hq, Sq]
};

// Reads only splits below each row's count; never assumes the rest was written. On the host, or,
// for views in device memory, on the GPU on options.stream (no allocation, no host
// synchronization). Counts in host memory are checked to lie in [0, S]; counts the GPU reads
// are clamped to [0, S].
Status combine(const CombineArgs& args, const RunOptions& options = {});

// Two attention states over disjoint key sets merged into the state over their union, with the
// combine's arithmetic (spec §3): attention over a shared prefix with attention over each
// sequence's own suffix (cascade), or two ranks' halves of the keys. Rows of [N, H]: a token-major
// layout that fits ragged batches.
struct MergeArgs {
  TensorView o_a;    // [N, H, D], f32, f16 or bf16
  TensorView lse_a;  // f32 [N, H], natural log (-inf: no key)
  TensorView o_b;    // [N, H, D]
  TensorView lse_b;  // f32 [N, H]
  TensorView o;      // [N, H, D], f32, f16 or bf16 (may be o_a or o_b)
  TensorView lse;    // optional f32 [N, H] (may be lse_a or lse_b)
};
Status merge_states(const MergeArgs& args, const RunOptions& options = {});

}  // namespace mxattn
