// The CUDA path of the API layer: the plan of whichever CUDA engine runs a call (api/engines.h
// chooses), for mxattn::attention, the command line and the tests.
#pragma once

#include "api/engines.h"
#include "mxattn/attention.h"
#include "mxattn/cuda.h"
#if MXATTN_WITH_PREFILL
#include "mxattn/cuda_prefill.h"
#endif

namespace mxattn::api {

class CudaPlan {
 public:
  // Validates `device_args` (metadata views on the host), chooses the engine and plans it. Where
  // the prefill engine is chosen but declines at planning (ErrorCode::unsupported: the device's
  // shared memory, say), the decode engine plans instead; every other error is final.
  Status plan(const AttentionArgs& device_args);
  // Launches the planned engine's kernels on `stream`, without waiting for them.
  Status run(const AttentionArgs& device_args, void* stream) const;
  EngineKind kind() const { return kind_; }
  bool uses_prefill() const { return kind_ == EngineKind::cuda_prefill; }
  const char* name() const { return name_of(kind_).data(); }

 private:
  EngineKind kind_ = EngineKind::cuda_decode;
  cuda::DecodePlan decode_;
#if MXATTN_WITH_PREFILL
  cuda::PrefillPlan prefill_;
#endif
};

// mxattn::attention on device tensors: a CudaPlan, run on `stream`, waited for.
Status run_cuda(const AttentionArgs& device_args, void* stream);

}  // namespace mxattn::api
