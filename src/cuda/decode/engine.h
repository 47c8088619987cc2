// The decode engine as the API layer calls it: problems arrive validated, with the split
// parameters the API layer chose (api/engines.h).
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "mxattn/cuda.h"

namespace mxattn::cuda::decode {

// What the engine supports beyond spec validity (ErrorCode::unsupported otherwise).
Status check_support(const core::Problem& p, const core::SplitParams& split);

// Builds the plan of `p` on the current CUDA device, replacing what `plan` held; on error `plan`
// is left as it was. Refuses what check_support refuses and partial buffers with too few slots.
Status build_plan(const core::Problem& p, const core::SplitParams& split,
                  const DecodeOptions& options, DecodePlan* plan);

}  // namespace mxattn::cuda::decode
