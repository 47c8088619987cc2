// Per-CTA timestamps of the decode split kernels, for finding where a CTA's time goes besides its
// keys (perf.md, session 13: 13-15 us a narrow CTA). Compiled in only with the CMake option
// MXATTN_DECODE_TIMELINE (a diagnostics build): elsewhere timeline_mark is empty and the kernels'
// code is unchanged. Thread 0 of each CTA writes %globaltimer (ns, comparable across SMs) at each
// mark into the per CTA (cuda::kTimelineSlots; slot kMarkSm: the SM), CTA index x + y * gridDim.x,
// into the buffer given to cuda::set_decode_timeline; mxattn_decode_bench --timeline reads it.
#pragma once

#include <cstdint>

#include "cuda/decode_params.h"
#include "mxattn/cuda.h"

namespace mxattn::cuda::detail {

enum TimelineMark : int {
  kMarkEntry = 0,      // the kernel's first instruction after its launch
  kMarkStarted = 1,    // the CTA's work located, its first copies issued
  kMarkQReady = 2,     // Q's fragments built (after the CTA's barrier)
  kMarkFirstData = 3,  // warp 0's first step's copy arrived
  kMarkLoopDone = 4,   // warp 0 through its last step
  kMarkMerged = 5,     // the four warps merged, O or the partials written
  kMarkEnd = 6,        // after the fused combine, if this CTA ran it
  kMarkSm = 7,         // slot of the SM's id, written at kMarkEntry
};

__device__ __forceinline__ void timeline_mark([[maybe_unused]] const DecodeParams& p,
                                              [[maybe_unused]] int mark) {
#ifdef MXATTN_DECODE_TIMELINE
  if (threadIdx.x != 0 || p.timeline == nullptr) return;
  const int64_t cta = int64_t(blockIdx.x) + int64_t(blockIdx.y) * gridDim.x;
  if (cta >= p.timeline_ctas) return;
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  p.timeline[cta * cuda::kTimelineSlots + mark] = now;
  if (mark == kMarkEntry) {
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    p.timeline[cta * cuda::kTimelineSlots + kMarkSm] = sm;
  }
#endif
}

}  // namespace mxattn::cuda::detail
