// An AttentionArgs mirrored on the GPU: every tensor view (Q, K, V, O, LSE, scales, partials,
// counts) copied into its own cudaMalloc allocation of exactly the view's logical size, strides
// kept; the metadata (kv_len, prefix_offset, block_table, sparse layout, k_mean) stays on the host,
// where planning reads it. Used by the command line and the GPU tests.
#pragma once

#include <vector>

#include "mxattn/attention.h"
#include "mxattn/cuda.h"
#if MXATTN_WITH_PREFILL
#include "mxattn/cuda_prefill.h"
#endif

namespace mxattn::cuda {

class DeviceArgs {
 public:
  DeviceArgs() = default;
  DeviceArgs(const DeviceArgs&) = delete;
  DeviceArgs& operator=(const DeviceArgs&) = delete;
  ~DeviceArgs();

  // Allocates and uploads every tensor view of `host`.
  static Status upload(const AttentionArgs& host, DeviceArgs* out);

  // The arguments with device pointers for the tensors, host pointers for the metadata.
  const AttentionArgs& args() const { return args_; }

  // Copies the inputs (Q, K, V and their scales) of `host`, which must have the same layout.
  Status upload_inputs(const AttentionArgs& host) const;
  // Fills O, LSE and the partials with NaN and the counts with -1 (all bits set).
  Status poison_outputs() const;
  // Copies O, LSE, the partials and the counts into `host`'s views (same layout).
  Status download_outputs(const AttentionArgs& host) const;

 private:
  AttentionArgs args_;
  std::vector<void*> allocations_;
};

// True when `p` points to device memory (so `Engine::automatic` picks the CUDA engine).
bool is_device_pointer(const void* p);

// Whether the CUDA path asks the prefill engine first: built in, more query rows than one decode
// tile, and no caller-sized partial buffers (those follow the decode engine's tiles). The prefill
// plan may still decline (ErrorCode::unsupported); then the decode engine runs.
bool prefers_prefill(const AttentionArgs& a);

// The plan of the CUDA engine that runs a problem: the prefill engine where prefers_prefill says so
// and it supports the problem, else the decode engine. The one home of that choice, for
// mxattn::attention and the command line.
class EnginePlan {
 public:
  // Plans on `device_args` (plan_prefill, plan_decode); every error but the prefill engine's
  // ErrorCode::unsupported, after which the decode engine plans, is final.
  Status plan(const AttentionArgs& device_args);
  // Launches the planned engine's kernels on `stream`, without waiting for them.
  Status run(const AttentionArgs& device_args, void* stream) const;
  bool uses_prefill() const;
  const char* name() const { return uses_prefill() ? "cuda-prefill" : "cuda-decode"; }

 private:
  DecodePlan decode_;
#if MXATTN_WITH_PREFILL
  PrefillPlan prefill_;
#endif
};

// The one-shot CUDA path of mxattn::attention: an EnginePlan, run on `stream`, waited for.
Status run_attention(const AttentionArgs& device_args, void* stream);

}  // namespace mxattn::cuda
