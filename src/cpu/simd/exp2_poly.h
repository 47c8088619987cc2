// Coefficients of 2^f on [-0.5, 0.5], degree 6 (c0 + c1 f + ... + c6 f^6), fitted for the
// smallest relative error (below 2e-9 in exact arithmetic, so f32 rounding dominates: ~1 ulp).
#pragma once

namespace mxattn::cpu::simd {

inline constexpr float kExp2Poly[7] = {1.000000000e+00f, 6.931471825e-01f, 2.402264625e-01f,
                                       5.550328642e-02f, 9.618489072e-03f, 1.339993090e-03f,
                                       1.534581097e-04f};

}  // namespace mxattn::cpu::simd
