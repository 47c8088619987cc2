#include <cuda_runtime.h>

#include <string>

#include "decode_step.h"
#include "mxattn/cuda.h"

namespace mxattn::python {

Status on_device(int device, const std::function<Status()>& work) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device) {
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
      return Status::runtime(std::string("device: ") + cudaGetErrorString(e));
    }
  }
  Status status = work();
  if (previous >= 0 && previous != device) cudaSetDevice(previous);
  return status;
}

bool cuda_engine_built() {
  return true;
}

void run_cuda(const CallArgs& call, uintptr_t stream) {
  Status status;
  {
    nb::gil_scoped_release released;
    status = on_device(call.placement().device_id, [&] {
      return attention(call.args(), RunOptions{Engine::cuda, 0, reinterpret_cast<void*>(stream)});
    });
  }
  raise_if_failed(status);
}

struct DecodeStep::State {
  CallArgs call;
  cuda::DecodePlan plan;
  int device = 0;
};

DecodeStep::DecodeStep(const CallArgs& call) : state_(std::make_unique<State>()) {
  state_->call = call;
  state_->device = call.placement().device_id;
  Status status;
  {
    nb::gil_scoped_release released;
    status = on_device(state_->device,
                       [&] { return cuda::plan_decode(state_->call.args(), &state_->plan); });
  }
  raise_if_failed(status);
}

DecodeStep::DecodeStep(DecodeStep&&) noexcept = default;
DecodeStep& DecodeStep::operator=(DecodeStep&&) noexcept = default;
DecodeStep::~DecodeStep() = default;

void DecodeStep::run(uintptr_t stream) const {
  Status status;
  {
    nb::gil_scoped_release released;
    status = on_device(state_->device, [&] {
      return cuda::run_decode(state_->plan, state_->call.args(), reinterpret_cast<void*>(stream));
    });
  }
  raise_if_failed(status);
}

int64_t DecodeStep::partial_slots() const {
  return state_->plan.partial_slots();
}
int64_t DecodeStep::split_blocks() const {
  return state_->plan.split_blocks();
}
bool DecodeStep::combines() const {
  return state_->plan.combines();
}
int DecodeStep::device_id() const {
  return state_->device;
}

}  // namespace mxattn::python
