// STUB: being written (CPU engine helper).
#include "cpu/engines.h"

namespace mxattn::cpu {
void run_reference(const core::Problem&, const core::SplitParams&) {}
void run_fast(const core::Problem&, const core::SplitParams&, int) {}
void run_combine(const CombineArgs&, int) {}
}  // namespace mxattn::cpu
