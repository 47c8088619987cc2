// The CPU engines. They receive validated problems only and cannot fail.
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "core/split_plan.h"
#include "mxattn/combine.h"
#include "mxattn/kv_cache.h"

namespace mxattn::cpu {

// f64 plain loops over exactly dequantized inputs: the truth for every other engine. With a split
// plan it writes the partials of exactly that partition, then combines them.
void run_reference(const core::Problem& p, const core::SplitParams& split);

// Blocked online softmax, SIMD (AVX-512 / AVX2 / portable, chosen at run time), multithreaded.
void run_fast(const core::Problem& p, const core::SplitParams& split, int threads);

// spec §3 combine on validated arguments, and the merge of two states (a combine of two splits).
void run_combine(const CombineArgs& args, int threads);
void run_merge(const MergeArgs& args, int threads);

// spec §11 cache write on validated arguments in host memory.
void write_kv(const KvWriteArgs& args, int threads);

}  // namespace mxattn::cpu
