// Builds without the CUDA engines: no GPU runner.
#include "runner.h"

namespace mxattn::tools {

bool gpu_present() {
  return false;
}

Status make_cuda_runner(workload::Problem&, std::unique_ptr<Runner>*) {
  return Status::unsupported("engine: this build of mxattn has no CUDA engine");
}

}  // namespace mxattn::tools
