// The comparison behind `mxattn run --verify`: NaN against the NaN of a reference that read the
// same broken input is a mismatch wherever the reference on the unquantized inputs is finite.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "verify.h"

namespace mxattn::tools {
namespace {

TensorView view_of(std::vector<float>& x) {
  return make_view(x.data(), DType::f32, {int64_t(x.size())});
}

TEST(Verify, NonFiniteOutputsMustMatchAFiniteTruth) {
  std::vector<float> want = {1.0f, NAN, NAN, -INFINITY, 2.0f};
  std::vector<float> got = {1.0f, NAN, NAN, -INFINITY, NAN};
  // The truth: finite where the stored problem was broken (index 1), non-finite where the inputs
  // themselves were (index 2) and where no key is seen (index 3, LSE -inf).
  std::vector<float> truth = {1.0f, 0.5f, NAN, -INFINITY, 2.0f};
  const core::ErrorMetrics m = compare_outputs(view_of(want), view_of(got), view_of(truth));
  EXPECT_EQ(m.mismatched_nonfinite, 2);  // index 1 (NaN against NaN, finite truth) and index 4
  EXPECT_EQ(m.max_abs, 0.0);

  got[4] = 2.0f;
  truth[1] = NAN;
  EXPECT_EQ(compare_outputs(view_of(want), view_of(got), view_of(truth)).mismatched_nonfinite, 0);
}

}  // namespace
}  // namespace mxattn::tools
