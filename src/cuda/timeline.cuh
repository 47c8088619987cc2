// Per-CTA timestamps of the decode split and prefill kernels, for finding where a CTA's time goes
// besides its keys (perf.md: a narrow decode CTA holds its slot 13-15 us besides its keys, session
// 13; a D128 prefill CTA about 3.3 key tiles' worth, 2026-12-04). Compiled in only with the CMake
// option MXATTN_TIMELINE (a diagnostics build): elsewhere timeline_stamp is empty and the kernels'
// code is unchanged. One thread of each CTA writes %globaltimer (ns, comparable across SMs) at
// each mark into cuda::kTimelineSlots words per CTA (the last: the SM's id, written with the first
// mark), CTA index x + y * gridDim.x, into the buffer given to cuda::set_kernel_timeline. The
// benchmarks' --timeline reads it (bench/cuda/bench_common.cuh).
#pragma once

#include <cstdint>

#include "mxattn/cuda.h"

namespace mxattn::cuda::detail {

// The decode split kernels' marks (decode_kernel.cuh, decode_narrow.cuh; thread 0).
enum DecodeMark : int {
  kMarkEntry = 0,      // the kernel's first instruction after its launch
  kMarkStarted = 1,    // the CTA's work located, its first copies issued
  kMarkQReady = 2,     // Q's fragments built (after the CTA's barrier)
  kMarkFirstData = 3,  // warp 0's first step's copy arrived
  kMarkLoopDone = 4,   // warp 0 through its last step
  kMarkMerged = 5,     // the four warps merged, O or the partials written
  kMarkEnd = 6,        // after the fused combine, if this CTA ran it
};
// The prefill kernel's marks (prefill_kernel.cuh, mainloop.cuh; the first math thread).
enum PrefillMark : int {
  kPrefillEntry = 0,     // the barriers initialized
  kPrefillQReady = 1,    // Q's tile in shared memory (copied, or dequantized from MX codes)
  kPrefillFirstS = 2,    // the first key tile's S GEMM complete
  kPrefillLoopDone = 3,  // the last P V GEMM complete
  kPrefillStored = 4,    // O (or the partials) written
};
inline constexpr int kMarkSm = 7;  // the slot of the SM's id, the last
#ifdef MXATTN_TIMELINE
static_assert(kMarkSm == kTimelineSlots - 1 && kMarkEnd < kMarkSm && kPrefillStored < kMarkSm,
              "a slot for every mark, the SM's last");
#endif

// Stamps `mark` of this CTA when `records` is set; the caller picks the one thread.
__device__ __forceinline__ void timeline_stamp([[maybe_unused]] uint64_t* records,
                                               [[maybe_unused]] int64_t ctas,
                                               [[maybe_unused]] int mark) {
#ifdef MXATTN_TIMELINE
  if (records == nullptr) return;
  const int64_t cta = int64_t(blockIdx.x) + int64_t(blockIdx.y) * gridDim.x;
  if (cta >= ctas) return;
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  records[cta * kTimelineSlots + mark] = now;
  if (mark == 0) {
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    records[cta * kTimelineSlots + kMarkSm] = sm;
  }
#endif
}

}  // namespace mxattn::cuda::detail
