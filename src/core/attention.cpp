// The API layer: validate once, pick an engine, run.
#include "mxattn/attention.h"
#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cpu/engines.h"
#include "mxattn/combine.h"

#if MXATTN_WITH_CUDA
#include "cuda/device_args.h"
#endif

namespace mxattn {

Status validate(const AttentionArgs& args) {
  core::Problem p;
  return core::validate_problem(args, &p);
}

Status attention(const AttentionArgs& args, const RunOptions& options) {
  core::Problem p;
  if (Status st = core::validate_problem(args, &p); !st) return st;
  Engine engine = options.engine;
#if MXATTN_WITH_CUDA
  if (engine == Engine::automatic && cuda::is_device_pointer(args.q.data)) engine = Engine::cuda;
#endif
  switch (engine) {
    case Engine::cuda:
#if MXATTN_WITH_CUDA
      return cuda::run_attention(args, options.stream);
#else
      return Status::unsupported("engine: this build of mxattn has no CUDA engine");
#endif
    case Engine::cpu_reference:
    case Engine::automatic:
    case Engine::cpu_fast: {
      // Both CPU engines share one split partition, so their partials compare split by split.
      const core::SplitParams split = cpu::split_params(p);
      if (Status st = core::validate_partial_slots(args, core::partial_slots(p, split)); !st)
        return st;
      if (engine == Engine::cpu_reference) {
        cpu::run_reference(p, split);
      } else {
        cpu::run_fast(p, split, options.threads);
      }
      return Status::ok();
    }
  }
  return Status::invalid("engine: unknown engine");
}

Status combine(const CombineArgs& args, const RunOptions& options) {
  if (Status st = core::validate_combine(args); !st) return st;
  cpu::run_combine(args, options.threads);
  return Status::ok();
}

}  // namespace mxattn
