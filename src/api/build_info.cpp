#include "mxattn/build_info.h"

#include "cpu/fast.h"

namespace mxattn {

BuildInfo build_info() {
  BuildInfo info;
  info.version = MXATTN_VERSION;
#if MXATTN_WITH_CUDA
  info.cuda = true;
  info.cuda_architectures = MXATTN_CUDA_ARCHITECTURES;
#endif
#if MXATTN_WITH_PREFILL
  info.cuda_prefill = true;
#endif
  for (const cpu::SimdIsa isa : cpu::supported_isas()) {
    info.cpu_kernel_sets.emplace_back(cpu::isa_name(isa));
  }
  info.cpu_kernel_set = cpu::isa_name(cpu::chosen_isa());
  return info;
}

}  // namespace mxattn
