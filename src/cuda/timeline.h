// Where the CUDA kernels of a diagnostics build (CMake MXATTN_TIMELINE) record their per-CTA
// timestamps: the buffer cuda::set_kernel_timeline last gave, read by the decode and prefill
// launches into their parameters. Empty in every other build.
#pragma once

#include <cstdint>

namespace mxattn::cuda::detail {

#ifdef MXATTN_TIMELINE
struct TimelineBuffer {
  uint64_t* records = nullptr;
  int64_t ctas = 0;
};
TimelineBuffer timeline_buffer();
#endif

}  // namespace mxattn::cuda::detail
