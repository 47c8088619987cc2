// A TestProblem's tensors on the GPU (cuda::DeviceArgs: each view in its own cudaMalloc allocation
// of exactly the view's logical size, so that compute-sanitizer's memcheck flags any read past a
// view's end), throwing on a CUDA error so a test fails loudly; and the checks that the decode and
// prefill suites share: split-by-split partials and a captured run replayed on new inputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/problem.h"
#include "core/split_plan.h"
#include "cpu/compare.h"
#include "cpu/test_problem.h"
#include "cuda/common/device_args.h"

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

// Poisons `dev`'s outputs, calls `run` (one engine run on dev's buffers, default stream), waits
// for the device and copies the outputs into `host`: the CUDA suites' run of one problem.
Status run_and_download(const TestProblem& host, DeviceProblem& dev,
                        const std::function<Status()>& run);

// What every CUDA engine's API refuses with invalid_argument, given `host`, a problem the engine
// runs: planning it with V's head dim unlike O's (spec validity), running it with views unlike the
// planned ones (O's strides), and running a plan never built.
template <class Plan>
void expect_invalid_arguments_rejected(const TestProblem& host,
                                       Status (*plan_fn)(const AttentionArgs&, Plan*),
                                       Status (*run_fn)(const Plan&, const AttentionArgs&, void*)) {
  AttentionArgs args = host.args();
  args.v.shape[3] = 64;  // V's head dim no longer matches O's
  Plan plan;
  Status st = plan_fn(args, &plan);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();

  DeviceProblem dev(host);
  ASSERT_TRUE(plan_fn(dev.args(), &plan).is_ok());
  AttentionArgs other = dev.args();
  other.o.stride[2] += 1;
  st = run_fn(plan, other, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();
  st = run_fn(Plan(), dev.args(), nullptr);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument) << st.message();
}

// A CUDA runtime call's result as a GoogleTest assertion (the error's text on failure).
::testing::AssertionResult cuda_ok(cudaError_t e);

// Index of (split, b, i, h, d) in Outputs::partial_o and of (split, b, h, i) in
// Outputs::partial_lse.
int64_t partial_o_index(const Spec& s, int64_t split, int64_t b, int64_t i, int64_t h, int64_t d);
int64_t partial_lse_index(const Spec& s, int64_t split, int64_t b, int64_t h, int64_t i);

// The partials of every split that the partition `split` of `p` (the validated problem of `ref`)
// writes (all of a query tile's splits, or in early-exit mode those below its exact count), split
// by split: O_s within `o_tol`, L_s within `lse_tol`.
void expect_partials_match(const TestProblem& ref, const core::Problem& p,
                           const core::SplitParams& split, const Outputs& want, const Outputs& got,
                           Tolerance o_tol, Tolerance lse_tol);

// Captures `run` (one engine run on `dev`'s buffers, on the given stream) in a CUDA graph, then
// for each of `problems` (same layout as `dev`'s problem) uploads its inputs into those buffers,
// poisons the outputs, replays the graph, downloads the outputs into `got` and calls
// `check(problem)`, which compares the problem's reference outputs with got's.
void expect_graph_replays(DeviceProblem& dev, const std::function<Status(cudaStream_t)>& run,
                          const std::vector<TestProblem*>& problems, const TestProblem& got,
                          const std::function<void(TestProblem&)>& check);

}  // namespace mxattn::test
