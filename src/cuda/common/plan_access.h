// How an engine's plan code fills the public plan objects (DecodePlan, PrefillPlan), whose state
// is private to the library.
#pragma once

#include <memory>
#include <utility>

namespace mxattn::cuda::detail {

struct PlanAccess {
  template <class Plan>
  static void set(Plan* plan, std::unique_ptr<typename Plan::Impl> impl) {
    plan->impl_ = std::move(impl);
  }
};

}  // namespace mxattn::cuda::detail
