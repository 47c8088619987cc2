#include "cuda/device_problem.h"

#include <memory>
#include <stdexcept>
#include <type_traits>

#include "core/plan.h"

namespace mxattn::test {
namespace {

void check(const Status& st) {
  if (!st) throw std::runtime_error(st.message());
}

}  // namespace

DeviceProblem::DeviceProblem(const TestProblem& host) {
  check(cuda::DeviceArgs::upload(host.args(), &device_));
}

void DeviceProblem::upload_inputs(const TestProblem& host) {
  check(device_.upload_inputs(host.args()));
}

void DeviceProblem::poison_outputs() {
  check(device_.poison_outputs());
}

void DeviceProblem::download_outputs(const TestProblem& host) const {
  check(device_.download_outputs(host.args()));
}

::testing::AssertionResult cuda_ok(cudaError_t e) {
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << cudaGetErrorString(e);
}

int64_t partial_o_index(const Spec& s, int64_t split, int64_t b, int64_t i, int64_t h, int64_t d) {
  return (((split * s.batch + b) * s.seq_q + i) * s.heads_q + h) * s.dim_v + d;
}

int64_t partial_lse_index(const Spec& s, int64_t split, int64_t b, int64_t h, int64_t i) {
  return ((split * s.batch + b) * s.heads_q + h) * s.seq_q + i;
}

Status run_and_download(const TestProblem& host, DeviceProblem& dev,
                        const std::function<Status()>& run) {
  dev.poison_outputs();
  if (Status st = run(); !st) return st;
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return Status::runtime(cudaGetErrorString(e));
  }
  dev.download_outputs(host);
  return Status::ok();
}

void expect_partials_match(const TestProblem& ref, const core::Problem& p,
                           const core::SplitParams& split, const Outputs& want, const Outputs& got,
                           Tolerance o_tol, Tolerance lse_tol) {
  const Spec& s = ref.spec();
  std::vector<float> want_o, got_o, want_l, got_l;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const core::QueryTile tile = core::query_tile(p, split, b, h, i / split.tile_m);
        const int64_t written = s.early_exit ? tile.count : tile.splits;
        for (int64_t sl = 0; sl < written; ++sl) {
          const int64_t l = partial_lse_index(s, sl, b, h, i);
          want_l.push_back(want.partial_lse[size_t(l)]);
          got_l.push_back(got.partial_lse[size_t(l)]);
          for (int64_t d = 0; d < s.dim_v; ++d) {
            const int64_t o = partial_o_index(s, sl, b, i, h, d);
            want_o.push_back(want.partial_o[size_t(o)]);
            got_o.push_back(got.partial_o[size_t(o)]);
          }
        }
      }
  EXPECT_TRUE(values_close(want_o, got_o, o_tol, "partial O"));
  EXPECT_TRUE(values_close(want_l, got_l, lse_tol, "partial LSE"));
}

namespace {

// Destroys a CUDA handle on every way out of a test, an assertion's early return included.
template <auto kDestroy, class Handle>
auto owned(Handle h) {
  using Pointee = std::remove_pointer_t<Handle>;
  struct Destroy {
    void operator()(Handle x) const { kDestroy(x); }
  };
  return std::unique_ptr<Pointee, Destroy>(h);
}

}  // namespace

void expect_graph_replays(DeviceProblem& dev, const std::function<Status(cudaStream_t)>& run,
                          const std::vector<TestProblem*>& problems, const TestProblem& got,
                          const std::function<void(TestProblem&)>& check) {
  cudaStream_t raw_stream = nullptr;
  ASSERT_TRUE(cuda_ok(cudaStreamCreate(&raw_stream)));
  const auto stream = owned<cudaStreamDestroy>(raw_stream);
  cudaGraph_t raw_graph = nullptr;
  ASSERT_TRUE(cuda_ok(cudaStreamBeginCapture(raw_stream, cudaStreamCaptureModeGlobal)));
  const Status captured = run(raw_stream);
  const cudaError_t ended = cudaStreamEndCapture(raw_stream, &raw_graph);
  const auto graph = owned<cudaGraphDestroy>(raw_graph);
  ASSERT_TRUE(cuda_ok(ended));
  ASSERT_TRUE(captured.is_ok()) << captured.message();
  cudaGraphExec_t raw_exec = nullptr;
  ASSERT_TRUE(cuda_ok(cudaGraphInstantiate(&raw_exec, raw_graph, 0)));
  const auto exec = owned<cudaGraphExecDestroy>(raw_exec);
  for (TestProblem* problem : problems) {
    ASSERT_TRUE(problem->run(Engine::cpu_reference).is_ok());
    dev.upload_inputs(*problem);
    dev.poison_outputs();
    ASSERT_TRUE(cuda_ok(cudaGraphLaunch(raw_exec, raw_stream)));
    ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(raw_stream)));
    dev.download_outputs(got);
    check(*problem);
  }
}

}  // namespace mxattn::test
