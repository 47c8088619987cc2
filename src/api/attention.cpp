// The front door: validate once, choose the engine and its split partition (api/engines.h), run.
#include "mxattn/attention.h"

#include <string>
#include <vector>

#include "api/engines.h"
#include "api/placement.h"
#include "core/plan.h"
#include "core/problem.h"
#include "core/ragged.h"
#include "core/validate.h"
#include "cpu/engines.h"
#include "mxattn/combine.h"
#include "mxattn/ragged.h"
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

Status attention(const RaggedArgs& args, const RunOptions& options) {
  if (args.q.given() && api::is_device_pointer(args.q.data)) {
    return Status::unsupported(
        "q: a ragged batch on the GPU runs through the batch plan; this call runs the CPU engines");
  }
  if (options.engine == Engine::cuda) {
    return Status::unsupported("engine: the ragged call runs the CPU engines");
  }
  std::vector<core::SequenceArgs> sequences;
  if (Status st = core::split_ragged(args, &sequences); !st) return st;
  // Every sequence is validated before any is run: on error nothing is written.
  std::vector<core::Problem> problems(sequences.size());
  std::vector<core::SplitParams> splits(sequences.size());
  api::EngineKind kind = api::EngineKind::cpu_fast;
  for (size_t n = 0; n < sequences.size(); ++n) {
    if (Status st = core::validate_problem(sequences[n].args, &problems[n]); !st) {
      return st.prefixed("sequence " + std::to_string(sequences[n].b) + ": ");
    }
    if (Status st = api::choose_engine(problems[n], options.engine, false, &kind); !st) return st;
    splits[n] = api::split_params(problems[n], kind);
  }
  for (size_t n = 0; n < sequences.size(); ++n) {
    if (kind == api::EngineKind::cpu_reference) {
      cpu::run_reference(problems[n], splits[n]);
    } else {
      cpu::run_fast(problems[n], splits[n], options.threads);
    }
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
