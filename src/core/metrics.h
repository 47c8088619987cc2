// Error metrics of spec §9: max abs error, relative L2 error and cosine similarity.
#pragma once

#include <cmath>
#include <cstdint>

namespace mxattn::core {

struct ErrorMetrics {
  double max_abs = 0;
  double rel_l2 = 0;
  double cosine = 1;
  int64_t mismatched_nonfinite =
      0;  // positions where exactly one side is non-finite, or they differ
};

// Accumulates the metrics of `got` against `want`, element by element. Non-finite values must match
// exactly (same infinity, or both NaN) and are left out of the norms.
class ErrorAccumulator {
 public:
  void add(double want, double got) {
    if (!std::isfinite(want) || !std::isfinite(got)) {
      const bool same = (std::isnan(want) && std::isnan(got)) || want == got;
      if (!same) ++nonfinite_;
      return;
    }
    const double d = got - want;
    max_abs_ = std::fmax(max_abs_, std::fabs(d));
    diff2_ += d * d;
    want2_ += want * want;
    got2_ += got * got;
    dot_ += want * got;
  }
  ErrorMetrics result() const {
    ErrorMetrics m;
    m.max_abs = max_abs_;
    m.rel_l2 = want2_ > 0 ? std::sqrt(diff2_ / want2_) : std::sqrt(diff2_);
    m.cosine = (want2_ > 0 && got2_ > 0) ? dot_ / std::sqrt(want2_ * got2_)
                                         : (want2_ == got2_ ? 1.0 : 0.0);
    m.mismatched_nonfinite = nonfinite_;
    return m;
  }

 private:
  double max_abs_ = 0, diff2_ = 0, want2_ = 0, got2_ = 0, dot_ = 0;
  int64_t nonfinite_ = 0;
};

}  // namespace mxattn::core
