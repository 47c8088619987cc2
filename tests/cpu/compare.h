// Comparisons of engine outputs for GoogleTest: within a tolerance set by the output dtype, or bit
// for bit, and the exact result of rows that see no key.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/test_problem.h"

namespace mxattn::test {

// |got - want| <= atol + rtol * max(|want|, |got|); non-finite values must match exactly.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// An engine's f32 arithmetic against the f64 reference, plus one rounding step of the output type
// (two values within the f32 tolerance may round to neighbouring f16/bf16 values). Against a bf16
// O the weights may be rounded to bf16 before P V (as GPU kernels do; the CPU engine's AMX kernels
// do it), which moves O by at most 2^-9 of the largest |V|, `v_max`.
inline Tolerance output_tolerance(DType type, double v_max) {
  const double rounding = type == DType::bf16 ? 0x1p-7 : type == DType::f16 ? 0x1p-10 : 0.0;
  const double weights = type == DType::bf16 ? 0x1p-9 * v_max : 0.0;
  return {2e-4 + weights, 1e-4 + rounding};
}

// The largest |V| of a problem.
inline double max_abs_value(const TestProblem& p) {
  double most = 0;
  for (const float x : p.data().v) most = std::fmax(most, std::fabs(double(x)));
  return most;
}

// The LSE is f32 whatever the output type.
inline Tolerance lse_tolerance() {
  return {2e-4, 2e-5};
}

inline bool same_nonfinite(float want, float got) {
  return (std::isnan(want) && std::isnan(got)) || want == got;
}

inline ::testing::AssertionResult values_close(const std::vector<float>& want,
                                               const std::vector<float>& got, Tolerance tol,
                                               const char* what) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values, expected " << want.size();
  }
  int64_t bad = 0, first_bad = -1;
  double worst = 0;
  for (size_t n = 0; n < want.size(); ++n) {
    const float w = want[n], g = got[n];
    bool ok;
    if (!std::isfinite(w) || !std::isfinite(g)) {
      ok = same_nonfinite(w, g);
    } else {
      const double err = std::fabs(double(g) - double(w));
      worst = std::fmax(worst, err);
      ok = err <= tol.atol + tol.rtol * std::fmax(std::fabs(w), std::fabs(g));
    }
    if (!ok && bad++ == 0) first_bad = int64_t(n);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << want.size() << " values differ; first at index "
         << first_bad << ": expected " << want[size_t(first_bad)] << ", got "
         << got[size_t(first_bad)] << " (largest finite error " << worst << ")";
}

inline ::testing::AssertionResult values_bitwise_equal(const std::vector<float>& want,
                                                       const std::vector<float>& got,
                                                       const char* what) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values, expected " << want.size();
  }
  for (size_t n = 0; n < want.size(); ++n) {
    const bool both_nan = std::isnan(want[n]) && std::isnan(got[n]);
    if (!both_nan && std::memcmp(&want[n], &got[n], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << what << ": first difference at index " << n
                                           << ": expected " << want[n] << ", got " << got[n];
    }
  }
  return ::testing::AssertionSuccess();
}

// O and LSE of `got` against the reference `want` for problem p.
inline ::testing::AssertionResult outputs_close(const TestProblem& p, const Outputs& want,
                                                const Outputs& got) {
  const Tolerance o_tol = output_tolerance(p.spec().o_type, max_abs_value(p));
  if (auto r = values_close(want.o, got.o, o_tol, "O"); !r) return r;
  if (auto r = values_close(want.lse, got.lse, lse_tolerance(), "LSE"); !r) return r;
  if (want.counts != got.counts) return ::testing::AssertionFailure() << "counts differ";
  return ::testing::AssertionSuccess();
}

// Everything written, bit for bit.
inline ::testing::AssertionResult outputs_bitwise_equal(const Outputs& want, const Outputs& got) {
  if (auto r = values_bitwise_equal(want.o, got.o, "O"); !r) return r;
  if (auto r = values_bitwise_equal(want.lse, got.lse, "LSE"); !r) return r;
  if (auto r = values_bitwise_equal(want.partial_o, got.partial_o, "partial O"); !r) return r;
  if (auto r = values_bitwise_equal(want.partial_lse, got.partial_lse, "partial LSE"); !r) return r;
  if (want.counts != got.counts) return ::testing::AssertionFailure() << "counts differ";
  return ::testing::AssertionSuccess();
}

// spec §1: a row that sees no key has O = 0 exactly and LSE = -inf. Counts the rows checked.
inline ::testing::AssertionResult empty_rows_exact(const TestProblem& p, const Outputs& out,
                                                   int64_t* empty_rows = nullptr) {
  const Spec& s = p.spec();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        if (!p.row_sees_nothing(b, h, i)) continue;
        if (empty_rows) ++*empty_rows;
        for (int64_t d = 0; d < s.dim_v; ++d) {
          const float o = out.o[size_t(((b * s.seq_q + i) * s.heads_q + h) * s.dim_v + d)];
          if (o != 0.0f) {
            return ::testing::AssertionFailure() << "row (b=" << b << ", h=" << h << ", i=" << i
                                                 << ") sees no key but O[" << d << "] = " << o;
          }
        }
        if (!out.lse.empty()) {
          const float lse = out.lse[size_t((b * s.heads_q + h) * s.seq_q + i)];
          if (lse != -INFINITY) {
            return ::testing::AssertionFailure() << "row (b=" << b << ", h=" << h << ", i=" << i
                                                 << ") sees no key but LSE = " << lse;
          }
        }
      }
  return ::testing::AssertionSuccess();
}

}  // namespace mxattn::test
