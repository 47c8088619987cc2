// A TestProblem's tensors on the GPU (cuda::DeviceArgs: each view in its own cudaMalloc allocation
// of exactly the view's logical size, so that compute-sanitizer's memcheck flags any read past a
// view's end), throwing on a CUDA error so a test fails loudly.
#pragma once

#include "cpu/problem_gen.h"
#include "cuda/device_args.h"

namespace mxattn::test {

class DeviceProblem {
 public:
  explicit DeviceProblem(const TestProblem& host);

  // The problem's arguments with device pointers for the tensors, host pointers for the metadata.
  const AttentionArgs& args() const { return device_.args(); }

  // Copies the inputs (Q, K, V and their scales) of `host`, which must have the same layout.
  void upload_inputs(const TestProblem& host);
  // Fills O, LSE and the partials with NaN and the counts with -1.
  void poison_outputs();
  // Copies O, LSE, the partials and the counts into `host`'s views (same layout).
  void download_outputs(const TestProblem& host) const;

 private:
  cuda::DeviceArgs device_;
};

}  // namespace mxattn::test
