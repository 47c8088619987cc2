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

// Reads only splits below each row's count; never assumes the rest was written.
Status combine(const CombineArgs& args, const RunOptions& options = {});

}  // namespace mxattn
