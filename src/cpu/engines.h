// The CPU engines. They receive validated problems only and cannot fail.
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "core/split_plan.h"
#include "mxattn/combine.h"

namespace mxattn::cpu {

// Default tile sizes of the CPU engines (the plan records whatever was used).
inline constexpr int64_t kTileM = 64;
inline constexpr int64_t kTileN = 64;
// split_kv = auto: key tiles per split (2048 keys of 64-key tiles). A work item covers at most one
// split, and the decode kernels fetch each tile's rows during the one before it, so the first tile
// of an item is read without that: 32-tile splits instead of 8 made decode 20-25% faster (B1
// Hq32 Hkv8 D128, 32k keys, Zen 4, 2 threads; docs/perf.md, 2026-12-06).
inline constexpr int64_t kAutoTarget = 32;

// The split parameters of both CPU engines for a problem: their tiles and auto target, under
// the user's SplitOptions.
inline core::SplitParams split_params(const core::Problem& p) {
  return core::resolve_split(p, kTileM, kTileN, kAutoTarget);
}

// f64 plain loops over exactly dequantized inputs: the truth for every other engine. With a split
// plan it writes the partials of exactly that partition, then combines them.
void run_reference(const core::Problem& p, const core::SplitParams& split);

// Blocked online softmax, SIMD (AVX-512 / AVX2 / portable, chosen at run time), multithreaded.
void run_fast(const core::Problem& p, const core::SplitParams& split, int threads);

// SPEC 3 combine on validated arguments.
void run_combine(const CombineArgs& args, int threads);

}  // namespace mxattn::cpu
