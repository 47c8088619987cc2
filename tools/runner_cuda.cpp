// The CUDA runner (built only with the CUDA engines).
#include <cuda_runtime.h>

#include <string>

#include "api/cuda_plan.h"
#include "cuda/common/device_args.h"
#include "runner.h"

namespace mxattn::tools {
namespace {

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::runtime(std::string(what) + ": " + cudaGetErrorString(e));
}

class CudaRunner final : public Runner {
 public:
  explicit CudaRunner(workload::Problem& w) : w_(w) {}
  ~CudaRunner() override {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }

  Status init() {
    if (Status st = cuda::DeviceArgs::upload(w_.args(), &device_); !st) return st;
    if (Status st = plan_.plan(device_.args()); !st) return st;
    if (Status st = check(cudaEventCreate(&start_), "cudaEventCreate"); !st) return st;
    return check(cudaEventCreate(&stop_), "cudaEventCreate");
  }

  const char* name() const override { return plan_.name(); }

  Status run(double* seconds) override {
    if (Status st = check(cudaEventRecord(start_), "cudaEventRecord"); !st) return st;
    if (Status st = plan_.run(device_.args(), nullptr); !st) return st;
    if (Status st = check(cudaEventRecord(stop_), "cudaEventRecord"); !st) return st;
    if (Status st = check(cudaEventSynchronize(stop_), "cudaEventSynchronize"); !st) return st;
    float ms = 0;
    if (Status st = check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime"); !st) {
      return st;
    }
    *seconds = double(ms) * 1e-3;
    return Status::ok();
  }
  Status poison_outputs() override { return device_.poison_outputs(); }
  Status fetch_outputs() override { return device_.download_outputs(w_.args()); }

 private:
  workload::Problem& w_;
  cuda::DeviceArgs device_;
  api::CudaPlan plan_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

bool gpu_present() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

Status make_cuda_runner(workload::Problem& w, std::unique_ptr<Runner>* out) {
  auto runner = std::make_unique<CudaRunner>(w);
  if (Status st = runner->init(); !st) return st;
  *out = std::move(runner);
  return Status::ok();
}

}  // namespace mxattn::tools
