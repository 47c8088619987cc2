#include "verify.h"

#include <cmath>

#include "base/host_tensor.h"

namespace mxattn::tools {

core::ErrorMetrics compare_outputs(const TensorView& want, const TensorView& got,
                                   const TensorView& truth) {
  core::ErrorAccumulator acc;
  int64_t lost = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float w = base::load_float(want, i), g = base::load_float(got, i);
    acc.add(w, g);
    if (!std::isfinite(w) && !std::isfinite(g) && std::isfinite(base::load_float(truth, i))) ++lost;
  }
  core::ErrorMetrics m = acc.result();
  m.mismatched_nonfinite += lost;
  return m;
}

}  // namespace mxattn::tools
