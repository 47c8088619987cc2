// A TestProblem's tensors on the GPU: every view except the host metadata (kv_len, prefix_offset,
// block_table, sparse layout, k_mean) copied into its own cudaMalloc allocation of exactly the
// view's logical size, so that compute-sanitizer's memcheck flags any read past a view's end.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/problem_gen.h"
#include "mxattn/attention.h"

namespace mxattn::test {

class DeviceProblem {
 public:
  explicit DeviceProblem(const TestProblem& host);
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;
  ~DeviceProblem();

  // The problem's arguments with device pointers for the tensors, host pointers for the metadata.
  const AttentionArgs& args() const { return args_; }

  // Copies the inputs (Q, K, V and their scales) of `host`, which must have the same layout.
  void upload_inputs(const TestProblem& host);
  // Fills O, LSE and the partials with NaN and the counts with -1.
  void poison_outputs();
  // Copies O, LSE, the partials and the counts into `host`'s views (same layout).
  void download_outputs(const TestProblem& host) const;

 private:
  AttentionArgs args_;
  std::vector<void*> allocations_;
};

}  // namespace mxattn::test
