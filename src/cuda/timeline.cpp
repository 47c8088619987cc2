#include "cuda/timeline.h"

#include "mxattn/cuda.h"

namespace mxattn::cuda {

#ifdef MXATTN_TIMELINE
namespace {
// One process-wide buffer: a diagnostics build's only state.
detail::TimelineBuffer g_buffer;
}  // namespace

void set_kernel_timeline(uint64_t* records, int64_t ctas) {
  g_buffer = {records, records == nullptr ? 0 : ctas};
}

detail::TimelineBuffer detail::timeline_buffer() {
  return g_buffer;
}
#endif

}  // namespace mxattn::cuda
