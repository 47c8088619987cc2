// The prefill engine as the API layer calls it: problems arrive validated, with the split
// parameters the API layer chose (api/engines.h).
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "mxattn/cuda_prefill.h"

namespace mxattn::cuda::prefill {

// What the engine supports beyond spec validity (ErrorCode::unsupported otherwise). Host code
// only: the API layer asks it before choosing between the prefill and decode engines.
Status check_support(const core::Problem& p);

// Builds the plan of `p` on the current CUDA device, replacing what `plan` held; on error `plan`
// is left as it was. Refuses what check_support refuses and partial buffers with too few slots.
Status build_plan(const core::Problem& p, const core::SplitParams& split, PrefillPlan* plan);

}  // namespace mxattn::cuda::prefill
