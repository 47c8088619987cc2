// The front door: validate once, choose the engine and its split partition (api/engines.h), run.
#include "mxattn/attention.h"

#include "api/engines.h"
#include "api/placement.h"
#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cpu/engines.h"
#include "mxattn/combine.h"
#if MXATTN_WITH_CUDA
#include "api/cuda_plan.h"
#include "cuda/combine/combine.h"
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
  bool on_gpu = false;
  if (Status st = api::same_memory({{"partial_o", &args.partial_o},
                                    {"partial_lse", &args.partial_lse},
                                    {"counts", &args.counts},
                                    {"o", &args.o},
                                    {"lse", &args.lse}},
                                   &on_gpu);
      !st) {
    return st;
  }
  if (Status st = core::validate_combine(args, !on_gpu); !st) return st;
  if (on_gpu) {
#if MXATTN_WITH_CUDA
    return cuda::detail::combine_on_device(args, options.stream);
#else
    return Status::unsupported(
        "combine: the partials are in device memory, but this build of "
        "mxattn has no CUDA engine");
#endif
  }
  cpu::run_combine(args, options.threads);
  return Status::ok();
}

Status merge_states(const MergeArgs& args, const RunOptions& options) {
  bool on_gpu = false;
  if (Status st = api::same_memory({{"o_a", &args.o_a},
                                    {"lse_a", &args.lse_a},
                                    {"o_b", &args.o_b},
                                    {"lse_b", &args.lse_b},
                                    {"o", &args.o},
                                    {"lse", &args.lse}},
                                   &on_gpu);
      !st) {
    return st;
  }
  if (Status st = core::validate_merge(args); !st) return st;
  if (on_gpu) {
#if MXATTN_WITH_CUDA
    return cuda::detail::merge_on_device(args, options.stream);
#else
    return Status::unsupported(
        "merge_states: the states are in device memory, but this build of "
        "mxattn has no CUDA engine");
#endif
  }
  cpu::run_merge(args, options.threads);
  return Status::ok();
}

}  // namespace mxattn
