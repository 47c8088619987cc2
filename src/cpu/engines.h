// The CPU engines. They receive validated problems only and cannot fail.
#pragma once

#include "core/problem.h"
#include "core/split_plan.h"
#include "mxattn/combine.h"

namespace mxattn::cpu {

// Default tile sizes of the CPU engines (the plan records whatever was used).
inline constexpr int64_t kTileM = 64;
inline constexpr int64_t kTileN = 64;

// f64 plain loops over exactly dequantized inputs: the truth for every other engine. With a split
// plan it writes the partials of exactly that partition, then combines them.
void run_reference(const core::Problem& p, const core::SplitParams& split);

// Blocked online softmax, SIMD (AVX-512 / AVX2 / portable, chosen at run time), multithreaded.
void run_fast(const core::Problem& p, const core::SplitParams& split, int threads);

// SPEC 3 combine on validated arguments.
void run_combine(const CombineArgs& args, int threads);

}  // namespace mxattn::cpu
