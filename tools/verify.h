// The comparison behind `mxattn run --verify`: an engine's output against the f64 reference on the
// stored inputs, with the reference on the unquantized inputs (dense KV) as the judge of which
// outputs must be finite.
#pragma once

#include "core/metrics.h"
#include "mxattn/tensor.h"

namespace mxattn::tools {

// The metrics of `got` against `want` (contiguous f32, f16 or bf16 of one shape). A position where
// both are non-finite counts as a mismatch when `truth` (same shape) is finite there: NaN against
// the NaN of a reference that read the same broken input (page padding, say) is no match.
core::ErrorMetrics compare_outputs(const TensorView& want, const TensorView& got,
                                   const TensorView& truth);

}  // namespace mxattn::tools
