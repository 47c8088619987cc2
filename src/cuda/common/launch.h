// Host-side handles of kernels, so that the engines' plan code (plain C++) configures and launches
// them through the CUDA runtime without seeing device code.
#pragma once

#include <cuda_runtime.h>

#include "base/text.h"
#include "mxattn/status.h"

namespace mxattn::cuda::detail {

inline Status cuda_failure(const char* what, cudaError_t e) {
  return Status::runtime(base::cat(what, ": ", cudaGetErrorString(e)));
}

// A kernel taking one parameter struct by value, and the dynamic shared memory it needs.
struct KernelRef {
  const void* function = nullptr;
  int smem_bytes = 0;
  bool chains = false;  // decode split kernels: a CTA may compute several splits
};

// Launches `kernel` with `params` (its one argument). `early_start`: the kernel directly follows
// another grid on the stream and may start before that grid ends (programmatic dependent launch;
// the kernel waits for the grid itself where it reads that grid's output).
template <class Params>
Status launch(const KernelRef& kernel, dim3 grid, dim3 block, Params& params, void* stream,
              bool early_start = false, const char* what = "kernel launch") {
  void* args[] = {&params};
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = size_t(kernel.smem_bytes);
  config.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (early_start) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  const cudaError_t e = cudaLaunchKernelExC(&config, kernel.function, args);
  if (e != cudaSuccess) return cuda_failure(what, e);
  return Status::ok();
}

}  // namespace mxattn::cuda::detail
