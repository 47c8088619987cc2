// The vector operations of the portable kernels: 4 f32 lanes as plain arrays, which the compiler
// maps onto whatever the baseline target has. Built without ISA flags, so it may use the shared
// codecs.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/float16.h"
#include "mx/formats.h"

namespace mxattn::cpu::simd {
namespace {

struct Portable {
  struct F {
    float v[4];
  };
  static constexpr int kLanes = 4;
  static constexpr int kScoreKeys = 4;
  static constexpr int kScoreVecs = 2;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVecs = 2;

  template <class Op>
  static F each(Op op) {
    F r;
    for (int i = 0; i < kLanes; ++i) r.v[i] = op(i);
    return r;
  }

  static F zero() { return set1(0.0f); }
  static F set1(float x) {
    return each([&](int) { return x; });
  }
  static F load(const float* p) {
    return each([&](int i) { return p[i]; });
  }
  static void store(float* p, F x) {
    for (int i = 0; i < kLanes; ++i) p[i] = x.v[i];
  }
  // Multiply, then add: without hardware FMA, std::fma would be a slow library call.
  static F fmadd(F a, F b, F c) {
    return each([&](int i) { return a.v[i] * b.v[i] + c.v[i]; });
  }
  static F mul(F a, F b) {
    return each([&](int i) { return a.v[i] * b.v[i]; });
  }
  static F add(F a, F b) {
    return each([&](int i) { return a.v[i] + b.v[i]; });
  }
  static F sub(F a, F b) {
    return each([&](int i) { return a.v[i] - b.v[i]; });
  }
  // Like the hardware max: b whenever the comparison fails, so a NaN b wins.
  static F max(F a, F b) {
    return each([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; });
  }
  static F keep_between(F s, F k, F first, F last) {
    return each(
        [&](int i) { return k.v[i] < first.v[i] || k.v[i] > last.v[i] ? -INFINITY : s.v[i]; });
  }
  static F zero_if_neg_inf(F x) {
    return each([&](int i) { return x.v[i] == -INFINITY ? 0.0f : x.v[i]; });
  }
  static F exp2(F x) {
    return each([&](int i) { return std::exp2(x.v[i]); });
  }
  static F reduce_lanes(const F* acc) {
    return each([&](int i) { return (acc[i].v[0] + acc[i].v[1]) + (acc[i].v[2] + acc[i].v[3]); });
  }

  static F from_f16(const uint16_t* p) {
    return each([&](int i) { return base::f16_to_float(p[i]); });
  }
  static F from_bf16(const uint16_t* p) {
    return each([&](int i) { return base::bf16_to_float(p[i]); });
  }
  static F from_e5m2(const uint8_t* p) {
    return each([&](int i) { return mx::decode(DType::e5m2, p[i]); });
  }
  static F from_e4m3_over_256(const uint8_t* p) {
    return each([&](int i) { return mx::decode(DType::e4m3, p[i]) * 0.00390625f; });
  }
  static void fp8_block32(bool e4m3, const uint8_t* p, F factor, float* dst) {
    for (int i = 0; i < 32; i += kLanes) {
      store(dst + i, mul(e4m3 ? from_e4m3_over_256(p + i) : from_e5m2(p + i), factor));
    }
  }
};

}  // namespace
}  // namespace mxattn::cpu::simd
