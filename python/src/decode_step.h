// The hooks between the Python API and the CUDA engines: a one-shot call, and a planned decode step
// (plan once, run many times: CUDA-graph safe). In a build without CUDA, a clear
// NotImplementedError.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "call_args.h"

namespace mxattn::python {

bool cuda_engine_built();

// Runs `work` (no Python state; called without the GIL) with GPU `device` current, then makes the
// caller's device current again. Without CUDA it runs `work` as it is.
Status on_device(int device, const std::function<Status()>& work);

// The one-shot CUDA path: the library's own dispatch (mxattn::attention with Engine::cuda) on the
// GPU holding `call`'s tensors, queued on `stream` and waited for.
void run_cuda(const CallArgs& call, uintptr_t stream);

class DecodeStep {
 public:
  // Validates and plans `call` (its data on one GPU, its metadata on the host) on that GPU; the
  // step keeps `call`'s arrays alive for its runs.
  explicit DecodeStep(const CallArgs& call);
  DecodeStep(DecodeStep&&) noexcept;
  DecodeStep& operator=(DecodeStep&&) noexcept;
  ~DecodeStep();

  // Launches the step on `stream` (a cudaStream_t as an integer; 0 is the legacy default stream)
  // over the planned arrays, whose contents may have changed since. No allocation, no host sync.
  void run(uintptr_t stream) const;

  int64_t partial_slots() const;
  int64_t split_blocks() const;
  bool combines() const;
  int device_id() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mxattn::python
