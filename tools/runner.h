// How `mxattn run` drives an engine: one timed run at a time, outputs poisoned and fetched back
// into the host workload for verification. The CPU runner calls mxattn::attention on host memory;
// the CUDA runner mirrors the workload on the GPU, plans once and times each run with events.
#pragma once

#include <memory>

#include "mxattn/attention.h"
#include "workload/problem.h"

namespace mxattn::tools {

class Runner {
 public:
  virtual ~Runner() = default;
  virtual const char* name() const = 0;
  // One run; `seconds` gets its time.
  virtual Status run(double* seconds) = 0;
  // Fills the outputs with NaN, so an element the next run fails to write shows.
  virtual Status poison_outputs() = 0;
  // Brings the outputs into the host workload's views (a no-op where they already are).
  virtual Status fetch_outputs() = 0;
};

std::unique_ptr<Runner> make_cpu_runner(workload::Problem& w, Engine engine, int threads);

// True when this build has the CUDA engine and the machine has a GPU.
bool gpu_present();

// The CUDA engines on a GPU mirror of `w`: prefill where api::choose_engine says so and it
// supports the problem, else decode (unsupported problems give ErrorCode::unsupported).
Status make_cuda_runner(workload::Problem& w, std::unique_ptr<Runner>* out);

}  // namespace mxattn::tools
