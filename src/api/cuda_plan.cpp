// The CUDA front door: the public plan functions of both CUDA engines (validation and split
// defaults here, the engines' own plan code behind them) and the plan of the engine that runs a
// call.
#include "api/cuda_plan.h"

#include <cuda_runtime.h>

#include <string>

#include "base/text.h"
#include "core/validate.h"
#include "cuda/common/head_dims.h"
#include "cuda/decode/engine.h"
#if MXATTN_WITH_PREFILL
#include "cuda/prefill/engine.h"
#endif

namespace mxattn {

namespace cuda {

Status plan_decode(const AttentionArgs& args, DecodePlan* plan, const DecodeOptions& options) {
  if (options.splits_per_cta < 0) {
    return Status::invalid(base::cat("options: splits_per_cta must be 0 (auto) or positive, got ",
                                     options.splits_per_cta));
  }
  core::Problem p;
  if (Status st = core::validate_problem(args, &p); !st) return st;
  return decode::build_plan(p, api::split_params(p, api::EngineKind::cuda_decode), options, plan);
}

Status plan_decode(const AttentionArgs& args, DecodePlan* plan) {
  return plan_decode(args, plan, DecodeOptions{});
}

#if MXATTN_WITH_PREFILL
PrefillTiles prefill_tiles(int64_t dim_qk, int64_t dim_v) {
  if (!has_head_dims(dim_qk, dim_v)) return {};
  return {kPrefillTileM, prefill_key_tile(int(dim_qk))};
}

Status plan_prefill(const AttentionArgs& args, PrefillPlan* plan) {
  core::Problem p;
  if (Status st = core::validate_problem(args, &p); !st) return st;
  if (Status st = prefill::check_support(p); !st) return st;
  return prefill::build_plan(p, api::split_params(p, api::EngineKind::cuda_prefill), plan);
}
#endif

}  // namespace cuda

namespace api {

Status CudaPlan::plan(const AttentionArgs& device_args) {
  core::Problem p;
  if (Status st = core::validate_problem(device_args, &p); !st) return st;
  if (Status st = choose_engine(p, Engine::cuda, true, &kind_); !st) return st;
#if MXATTN_WITH_PREFILL
  if (kind_ == EngineKind::cuda_prefill) {
    const Status planned = cuda::prefill::build_plan(p, split_params(p, kind_), &prefill_);
    if (planned || planned.code() != ErrorCode::unsupported) return planned;
    kind_ = EngineKind::cuda_decode;
  }
#endif
  return cuda::decode::build_plan(p, split_params(p, kind_), cuda::DecodeOptions{}, &decode_);
}

Status CudaPlan::run(const AttentionArgs& device_args, void* stream) const {
#if MXATTN_WITH_PREFILL
  if (uses_prefill()) return cuda::run_prefill(prefill_, device_args, stream);
#endif
  return cuda::run_decode(decode_, device_args, stream);
}

Status run_cuda(const AttentionArgs& device_args, void* stream) {
  CudaPlan plan;
  if (Status st = plan.plan(device_args); !st) return st;
  if (Status st = plan.run(device_args, stream); !st) return st;
  // The plan's workspace is freed on return: wait for the step that uses it.
  const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    return Status::runtime(std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
  }
  return Status::ok();
}

}  // namespace api
}  // namespace mxattn
