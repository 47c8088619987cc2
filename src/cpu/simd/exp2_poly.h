// Coefficients of 2^f on [-0.5, 0.5], degree 6 (c0 + c1 f + ... + c6 f^6), fitted for the
// smallest relative error (below 2e-9 in exact arithmetic, so f32 rounding dominates: ~1 ulp).
#pragma once

namespace mxattn::cpu::simd {

inline constexpr float kExp2Poly[7] = {1.000000000e+00f, 6.931471825e-01f, 2.402264625e-01f,
                                       5.550328642e-02f, 9.618489072e-03f, 1.339993090e-03f,
                                       1.534581097e-04f};

// Degree 4, relative error below 2.7e-6 (with f32 rounding): for softmax weights that the AMX
// kernels keep to 16 bits (two bf16 parts, against bf16 values), two FMAs fewer an exponential.
inline constexpr float kExp2Poly4[5] = {9.999992847e-01f, 6.931218505e-01f, 2.402474433e-01f,
                                        5.591771379e-02f, 9.570036083e-03f};

}  // namespace mxattn::cpu::simd
