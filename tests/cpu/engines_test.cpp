// The fast engine against the reference on random problems of every feature: O and LSE within a
// tolerance set by the output dtype, exact counts, exact results for rows that see nothing.
#include <gtest/gtest.h>

#include <cstdint>

#include "cpu/compare.h"
#include "cpu/problem_gen.h"

namespace mxattn::test {
namespace {

constexpr uint64_t kConfigs = 200;

TEST(FastEngine, MatchesReferenceOnRandomProblems) {
  int64_t empty_rows = 0;
  for (uint64_t seed = 1; seed <= kConfigs; ++seed) {
    const Spec spec = random_spec(seed);
    SCOPED_TRACE(spec.describe());
    TestProblem p(spec);
    ASSERT_TRUE(p.run(Engine::cpu_reference).is_ok());
    const Outputs want = p.outputs();
    ASSERT_TRUE(empty_rows_exact(p, want, &empty_rows));
    ASSERT_TRUE(p.run(Engine::cpu_fast).is_ok());
    const Outputs got = p.outputs();
    ASSERT_TRUE(empty_rows_exact(p, got));
    ASSERT_TRUE(outputs_close(want, got, spec.o_type));
  }
  // The sample must hold masked rows, or the exactness check above proves nothing.
  EXPECT_GT(empty_rows, 0);
}

}  // namespace
}  // namespace mxattn::test
