// The front door: validate once, choose the engine and its split partition (api/engines.h), run.
#include "mxattn/attention.h"

#include "api/engines.h"
#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cpu/engines.h"
#include "mxattn/combine.h"
#if MXATTN_WITH_CUDA
#include "api/cuda_plan.h"
#endif

namespace mxattn {

Status validate(const AttentionArgs& args) {
  core::Problem p;
  return core::validate_problem(args, &p);
}

Status attention(const AttentionArgs& args, const RunOptions& options) {
  core::Problem p;
  if (Status st = core::validate_problem(args, &p); !st) return st;
  const bool on_gpu = api::is_device_pointer(args.q.data);
  api::EngineKind kind;
  if (Status st = api::choose_engine(p, options.engine, on_gpu, &kind); !st) return st;
  if (api::is_cuda(kind) != on_gpu) {
    return Status::invalid(api::is_cuda(kind)
                               ? "engine: the CUDA engine reads device memory, but q is on the host"
                               : "engine: the CPU engines read host memory, but q is on a GPU");
  }
#if MXATTN_WITH_CUDA
  if (api::is_cuda(kind)) return api::run_cuda(args, options.stream);
#endif
  const core::SplitParams split = api::split_params(p, kind);
  if (Status st = core::validate_partial_slots(args, core::partial_slots(p, split)); !st) return st;
  if (kind == api::EngineKind::cpu_reference) {
    cpu::run_reference(p, split);
  } else {
    cpu::run_fast(p, split, options.threads);
  }
  return Status::ok();
}

Status combine(const CombineArgs& args, const RunOptions& options) {
  if (Status st = core::validate_combine(args); !st) return st;
  cpu::run_combine(args, options.threads);
  return Status::ok();
}

}  // namespace mxattn
