// An AttentionArgs mirrored on the GPU: every tensor view (Q, K, V, O, LSE, scales, partials,
// counts) copied into its own cudaMalloc allocation of exactly the view's logical size, strides
// kept; the metadata (kv_len, prefix_offset, block_table, sparse layout, k_mean) stays on the host,
// where planning reads it. Used by the command line and the GPU tests.
#pragma once

#include <vector>

#include "mxattn/attention.h"
#include "mxattn/status.h"

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

}  // namespace mxattn::cuda
