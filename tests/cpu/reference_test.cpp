// The reference engine against computations small enough to do by hand, so that the truth every
// other engine is checked against is itself checked. Tensors are built here directly (no generator,
// no quantizer): codes and scales are written out.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mxattn/attention.h"

namespace mxattn {
namespace {

// One query, two keys of dimension 2, scale 1: q = (1, 0), k0 = (1, 0), k1 = (0, 1), so the scores
// are 1 and 0; v0 = (1, 2), v1 = (3, -1).
struct TwoKeys {
  std::vector<float> q = {1, 0};
  std::vector<float> k = {1, 0, 0, 1};
  std::vector<float> v = {1, 2, 3, -1};
  std::vector<float> o = std::vector<float>(2, NAN);
  float lse = NAN;

  AttentionArgs args() {
    AttentionArgs a;
    a.q = make_view(q.data(), DType::f32, {1, 1, 1, 2});
    a.k = make_view(k.data(), DType::f32, {1, 2, 1, 2});
    a.v = make_view(v.data(), DType::f32, {1, 2, 1, 2});
    a.o = make_view(o.data(), DType::f32, {1, 1, 1, 2});
    a.lse = make_view(&lse, DType::f32, {1, 1, 1});
    a.scale = 1.0f;
    return a;
  }
};

RunOptions reference() {
  RunOptions r;
  r.engine = Engine::cpu_reference;
  return r;
}

// Unsplit, and one key per split (tile_n = 1, two splits) through the combine.
std::vector<SplitOptions> split_variants() {
  SplitOptions one_split;
  SplitOptions two_splits;
  two_splits.split_kv = 2;
  two_splits.tile_n = 1;
  return {one_split, two_splits};
}

TEST(ReferenceSanity, SoftmaxOfTwoKeysByHand) {
  const double e = std::exp(1.0);
  const double p0 = e / (e + 1), p1 = 1 / (e + 1);
  for (const SplitOptions& split : split_variants()) {
    SCOPED_TRACE(split.split_kv);
    TwoKeys t;
    AttentionArgs a = t.args();
    a.split = split;
    ASSERT_TRUE(attention(a, reference()).is_ok());
    EXPECT_NEAR(t.o[0], p0 * 1 + p1 * 3, 1e-6);
    EXPECT_NEAR(t.o[1], p0 * 2 + p1 * -1, 1e-6);
    EXPECT_NEAR(t.lse, std::log(e + 1), 1e-6);
  }
}

TEST(ReferenceSanity, CausalFirstRowSeesOnlyTheFirstKey) {
  std::vector<float> q = {1, 0, 1, 0};
  std::vector<float> k = {1, 0, 0, 1};
  std::vector<float> v = {1, 2, 3, -1};
  std::vector<float> o(4, NAN), lse(2, NAN);
  AttentionArgs a;
  a.q = make_view(q.data(), DType::f32, {1, 2, 1, 2});
  a.k = make_view(k.data(), DType::f32, {1, 2, 1, 2});
  a.v = make_view(v.data(), DType::f32, {1, 2, 1, 2});
  a.o = make_view(o.data(), DType::f32, {1, 2, 1, 2});
  a.lse = make_view(lse.data(), DType::f32, {1, 1, 2});
  a.scale = 1.0f;
  a.causal = Causal::top_left;
  ASSERT_TRUE(attention(a, reference()).is_ok());
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_EQ(o[1], 2.0f);
  EXPECT_EQ(lse[0], 1.0f);
  const double e = std::exp(1.0);
  EXPECT_NEAR(o[2], (e * 1 + 3) / (e + 1), 1e-6);
  EXPECT_NEAR(lse[1], std::log(e + 1), 1e-6);
}

TEST(ReferenceSanity, NoVisibleKeyGivesZeroAndMinusInf) {
  TwoKeys t;
  int32_t kv_len = 0;
  AttentionArgs a = t.args();
  a.kv_len = make_view(&kv_len, DType::i32, {1});
  ASSERT_TRUE(attention(a, reference()).is_ok());
  EXPECT_EQ(t.o[0], 0.0f);
  EXPECT_EQ(t.o[1], 0.0f);
  EXPECT_EQ(t.lse, -INFINITY);
}

// K smoothing: K - kbar with kbar = (0.5, 0.5) is exact in f32; the scores become 0.5 and -0.5 and
// the reference adds q . kbar = 0.5 back, giving the LSE of the unsmoothed keys.
TEST(ReferenceSanity, KSmoothingShiftsTheLseBack) {
  const double e = std::exp(1.0);
  for (const SplitOptions& split : split_variants()) {
    SCOPED_TRACE(split.split_kv);
    TwoKeys t;
    t.k = {0.5f, -0.5f, -0.5f, 0.5f};
    std::vector<float> k_mean = {0.5f, 0.5f};
    AttentionArgs a = t.args();
    a.k_mean = make_view(k_mean.data(), DType::f32, {1, 1, 2});
    a.split = split;
    ASSERT_TRUE(attention(a, reference()).is_ok());
    EXPECT_NEAR(t.o[0], (e * 1 + 3) / (e + 1), 1e-6);
    EXPECT_NEAR(t.lse, std::log(e + 1), 1e-6);
  }
}

// MX inputs written as codes: K in E4M3 (code 0x38 is 1.0) with scales 2^1 and 2^-1, so the scores
// are 2 and 0.5; V in E2M1 along the keys (0x2 is 1.0, 0x5 is 3.0) with one scale 2^2 for both
// keys.
TEST(ReferenceSanity, MxCodesAndScalesByHand) {
  constexpr int64_t kDim = 32;
  std::vector<float> q(kDim, 0.0f);
  q[0] = 1.0f;
  std::vector<uint8_t> k_codes(2 * kDim, 0);
  k_codes[0] = 0x38;
  k_codes[kDim] = 0x38;
  std::vector<uint8_t> k_scales = {128, 126};
  std::vector<uint8_t> v_codes(2 * kDim / 2);
  std::memset(v_codes.data(), 0x22, kDim / 2);
  std::memset(v_codes.data() + kDim / 2, 0x55, kDim / 2);
  std::vector<uint8_t> v_scales(kDim, 129);
  std::vector<float> o(kDim, NAN);
  float lse = NAN;
  AttentionArgs a;
  a.q = make_view(q.data(), DType::f32, {1, 1, 1, kDim});
  a.k = make_view(k_codes.data(), DType::e4m3, {1, 2, 1, kDim});
  a.k_scales = make_view(k_scales.data(), DType::e8m0, {1, 2, 1, 1});
  a.v = make_view(v_codes.data(), DType::e2m1, {1, 2, 1, kDim});
  a.v_scales = make_view(v_scales.data(), DType::e8m0, {1, 1, 1, kDim});
  a.v_scale_axis = VScaleAxis::keys;
  a.o = make_view(o.data(), DType::f32, {1, 1, 1, kDim});
  a.lse = make_view(&lse, DType::f32, {1, 1, 1});
  a.scale = 1.0f;
  ASSERT_TRUE(attention(a, reference()).is_ok());
  const double w0 = std::exp(2.0), w1 = std::exp(0.5);
  for (int64_t d = 0; d < kDim; ++d)
    EXPECT_NEAR(o[size_t(d)], (w0 * 4 + w1 * 12) / (w0 + w1), 1e-5);
  EXPECT_NEAR(lse, std::log(w0 + w1), 1e-6);
}

// NaN in a visible value reaches the rows that see it and only them.
TEST(ReferenceSanity, NanInAVisibleValuePropagates) {
  std::vector<float> q = {1, 0, 1, 0};
  std::vector<float> k = {1, 0, 0, 1};
  std::vector<float> v = {1, 2, NAN, -1};
  std::vector<float> o(4, 0.0f);
  AttentionArgs a;
  a.q = make_view(q.data(), DType::f32, {1, 2, 1, 2});
  a.k = make_view(k.data(), DType::f32, {1, 2, 1, 2});
  a.v = make_view(v.data(), DType::f32, {1, 2, 1, 2});
  a.o = make_view(o.data(), DType::f32, {1, 2, 1, 2});
  a.causal = Causal::top_left;
  ASSERT_TRUE(attention(a, reference()).is_ok());
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_TRUE(std::isnan(o[2]));
}

}  // namespace
}  // namespace mxattn
