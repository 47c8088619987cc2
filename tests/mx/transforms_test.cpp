// The producer transforms of spec §5: Hadamard rotation and K smoothing.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mxattn/mx.h"

namespace mxattn {
namespace {

std::vector<float> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// Rotating the rows of the identity gives H / sqrt(n), H[i][j] = (-1)^popcount(i & j) (Sylvester).
TEST(Hadamard, RotatedIdentityIsTheNormalizedSylvesterMatrix) {
  for (int64_t n : {1, 2, 4, 32, 128}) {
    SCOPED_TRACE(n);
    std::vector<float> m(size_t(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i) m[size_t(i * n + i)] = 1.0f;
    ASSERT_TRUE(hadamard_rotate(make_view(m.data(), DType::f32, {n, n})));
    const double norm = 1.0 / std::sqrt(double(n));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double sign = std::popcount(uint64_t(i & j)) % 2 ? -1.0 : 1.0;
        ASSERT_NEAR(m[size_t(i * n + j)], sign * norm, 1e-7) << i << ", " << j;
      }
    }
    // Orthonormal: H H = I, so rotating again gives the identity back.
    ASSERT_TRUE(hadamard_rotate(make_view(m.data(), DType::f32, {n, n})));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(m[size_t(i * n + j)], i == j ? 1.0 : 0.0, 1e-6);
    }
  }
}

TEST(Hadamard, PreservesQueryKeyDotProducts) {
  const uint64_t seed = 2001;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t batch = 2, seq = 5, heads = 3, dim = 64;
  std::vector<float> q = random_values(batch * seq * heads * dim, seed);
  std::vector<float> k = random_values(batch * seq * heads * dim, seed + 1);
  const std::vector<float> q0 = q, k0 = k;
  ASSERT_TRUE(hadamard_rotate(make_view(q.data(), DType::f32, {batch, seq, heads, dim})));
  ASSERT_TRUE(hadamard_rotate(make_view(k.data(), DType::f32, {batch, seq, heads, dim})));
  bool changed = false;
  for (int64_t a = 0; a < batch * seq * heads; ++a) {
    for (int64_t b = 0; b < batch * seq * heads; ++b) {
      double before = 0, after = 0;
      for (int64_t d = 0; d < dim; ++d) {
        before += double(q0[size_t(a * dim + d)]) * k0[size_t(b * dim + d)];
        after += double(q[size_t(a * dim + d)]) * k[size_t(b * dim + d)];
      }
      ASSERT_NEAR(after, before, 1e-4 * (1 + std::fabs(before)));
    }
    changed |= q[size_t(a * dim)] != q0[size_t(a * dim)];
  }
  EXPECT_TRUE(changed);
}

TEST(Hadamard, StridedLastAxisAndErrors) {
  // Columns of a [8, 4] matrix: the rotated axis has stride 4.
  std::vector<float> m(32);
  for (size_t i = 0; i < m.size(); ++i) m[i] = float(i);
  TensorView columns = permuted(make_view(m.data(), DType::f32, {8, 4}), {1, 0});
  ASSERT_TRUE(hadamard_rotate(columns));
  for (int64_t c = 0; c < 4; ++c) {
    double sum = 0;
    for (int64_t r = 0; r < 8; ++r) sum += double(r * 4 + c);
    EXPECT_NEAR(m[size_t(c)], sum / std::sqrt(8.0), 1e-4);
  }
  std::vector<float> odd(48);
  Status s = hadamard_rotate(make_view(odd.data(), DType::f32, {2, 24}));
  EXPECT_EQ(s.message(), "x's last dimension must be a power of two but is 24");
  s = hadamard_rotate(make_view(odd.data(), DType::f16, {2, 16}));
  EXPECT_EQ(s.message(), "x must be f32 but is f16");
  s = hadamard_rotate(make_view(odd.data(), DType::f32, {2, 16}, 100));
  EXPECT_EQ(s.message(), "x needs 128 bytes for shape [2, 16] but only 100 are backed");
}

TEST(SmoothKeys, RemovesTheMeanOfValidKeysOnly) {
  const uint64_t seed = 2002;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t batch = 3, keys = 10, heads = 2, dim = 16;
  std::vector<float> k = random_values(batch * keys * heads * dim, seed);
  for (float& x : k) x += 3.0f;
  const int32_t lengths[] = {7, 10, 0};
  const auto at = [&](int64_t b, int64_t j, int64_t h, int64_t d) {
    return size_t(((b * keys + j) * heads + h) * dim + d);
  };
  // Memory past kv_len never influences the result, NaN included.
  for (int64_t h = 0; h < heads; ++h) k[at(0, 8, h, 3)] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> k0 = k;
  std::vector<int32_t> kv_len(lengths, lengths + batch);
  std::vector<float> mean(size_t(batch * heads * dim), -1.0f);
  ASSERT_TRUE(smooth_keys(make_view(k.data(), DType::f32, {batch, keys, heads, dim}),
                          make_view(kv_len.data(), DType::i32, {batch}),
                          make_view(mean.data(), DType::f32, {batch, heads, dim})));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < dim; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < lengths[b]; ++j) sum += k0[at(b, j, h, d)];
        const double want = lengths[b] > 0 ? sum / lengths[b] : 0.0;
        const float got = mean[size_t((b * heads + h) * dim + d)];
        ASSERT_NEAR(got, want, 1e-6) << b << ", " << h << ", " << d;
        for (int64_t j = 0; j < keys; ++j) {
          const float before = k0[at(b, j, h, d)];
          const float after = k[at(b, j, h, d)];
          if (j < lengths[b]) {
            ASSERT_EQ(after, before - got);
          } else {
            ASSERT_EQ(std::bit_cast<uint32_t>(after), std::bit_cast<uint32_t>(before));
          }
        }
      }
    }
  }
}

TEST(SmoothKeys, AllKeysWithoutKvLenAndErrors) {
  const int64_t batch = 1, keys = 4, heads = 1, dim = 2;
  std::vector<float> k = {1, 10, 2, 20, 3, 30, 6, 60};
  std::vector<float> mean(2);
  ASSERT_TRUE(smooth_keys(make_view(k.data(), DType::f32, {batch, keys, heads, dim}), TensorView(),
                          make_view(mean.data(), DType::f32, {batch, heads, dim})));
  EXPECT_EQ(mean, (std::vector<float>{3, 30}));
  EXPECT_EQ(k, (std::vector<float>{-2, -20, -1, -10, 0, 0, 3, 30}));

  std::vector<int32_t> too_long = {5};
  Status s = smooth_keys(make_view(k.data(), DType::f32, {batch, keys, heads, dim}),
                         make_view(too_long.data(), DType::i32, {1}),
                         make_view(mean.data(), DType::f32, {batch, heads, dim}));
  EXPECT_EQ(s.message(), "kv_len[0] = 5 is outside [0, 4]");
  s = smooth_keys(make_view(k.data(), DType::f32, {batch, keys, heads, dim}), TensorView(),
                  make_view(mean.data(), DType::f32, {batch, heads, dim}, 4));
  EXPECT_EQ(s.message(), "k_mean needs 8 bytes for shape [1, 1, 2] but only 4 are backed");
  s = smooth_keys(make_view(k.data(), DType::f32, {batch, keys, heads, dim}), TensorView(),
                  make_view(mean.data(), DType::f32, {batch, 2, dim}));
  EXPECT_EQ(s.message(), "k_mean must be f32 [1, 1, 2] but is f32 [1, 2, 2]");
  EXPECT_EQ(k, (std::vector<float>{-2, -20, -1, -10, 0, 0, 3, 30}));
}

}  // namespace
}  // namespace mxattn

namespace mxattn {
namespace {

// quantize_keys is the producer's pipeline in one call: rotate, smooth over the valid keys, then
// quantize along the head dim; the same bits as the three steps one after the other, and K left
// as it was.
TEST(QuantizeKeys, EqualsRotatingSmoothingAndQuantizingInTurn) {
  const int64_t B = 2, S = 70, H = 3, D = 64;
  for (const DType format : {DType::e4m3, DType::e2m1}) {
    for (const bool rotate : {false, true}) {
      for (const bool smooth : {false, true}) {
        SCOPED_TRACE(std::string(name_of(format)) + " rotate " + std::to_string(rotate) +
                     " smooth " + std::to_string(smooth));
        std::vector<float> k(size_t(B * S * H * D));
        for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.37f * float(i)) * 3.0f + 0.5f;
        const std::vector<float> original = k;
        std::vector<int32_t> kv_len = {S, 41};
        const int64_t code_bytes = B * S * H * D * bits_of(format) / 8;
        std::vector<uint8_t> data(static_cast<size_t>(code_bytes));
        std::vector<uint8_t> scales(static_cast<size_t>(B * S * H * D / 32));
        std::vector<float> mean(size_t(B * H * D));
        KeyTransforms t;
        t.rotate = rotate;
        if (smooth) {
          t.k_mean = make_view(mean.data(), DType::f32, {B, H, D});
          t.kv_len = make_view(kv_len.data(), DType::i32, {B});
        }
        ASSERT_TRUE(quantize_keys(make_view(k.data(), DType::f32, {B, S, H, D}),
                                  make_view(data.data(), format, {B, S, H, D}),
                                  make_view(scales.data(), DType::e8m0, {B, S, H, D / 32}),
                                  ScaleMode::floor, t)
                        .is_ok());
        EXPECT_EQ(k, original);

        std::vector<float> work = original;
        std::vector<float> want_mean(size_t(B * H * D));
        const TensorView w = make_view(work.data(), DType::f32, {B, S, H, D});
        if (rotate) {
          ASSERT_TRUE(hadamard_rotate(w).is_ok());
        }
        if (smooth) {
          ASSERT_TRUE(smooth_keys(w, make_view(kv_len.data(), DType::i32, {B}),
                                  make_view(want_mean.data(), DType::f32, {B, H, D}))
                          .is_ok());
          EXPECT_EQ(mean, want_mean);
        }
        std::vector<uint8_t> want_data(data.size()), want_scales(scales.size());
        ASSERT_TRUE(quantize(w, make_view(want_data.data(), format, {B, S, H, D}),
                             make_view(want_scales.data(), DType::e8m0, {B, S, H, D / 32}), 3,
                             ScaleMode::floor)
                        .is_ok());
        EXPECT_EQ(data, want_data);
        EXPECT_EQ(scales, want_scales);
      }
    }
  }
}

TEST(QuantizeKeys, BadArgumentsAreNamed) {
  std::vector<float> k(2 * 4 * 1 * 48);
  std::vector<uint8_t> data(k.size()), scales(k.size());
  std::vector<int32_t> kv_len = {4, 9};
  std::vector<float> mean(2 * 48);
  KeyTransforms t;
  t.rotate = true;
  Status st =
      quantize_keys(make_view(k.data(), DType::f32, {2, 4, 1, 48}),
                    make_view(data.data(), DType::e4m3, {2, 4, 1, 48}),
                    make_view(scales.data(), DType::e8m0, {2, 4, 1, 2}), ScaleMode::floor, t);
  EXPECT_NE(st.message().find("rotate: the Hadamard rotation needs D a power of two, found 48"),
            std::string::npos)
      << st.message();
  t.rotate = false;
  t.k_mean = make_view(mean.data(), DType::f32, {2, 1, 48});
  t.kv_len = make_view(kv_len.data(), DType::i32, {2});
  st = quantize_keys(make_view(k.data(), DType::f32, {2, 4, 1, 48}),
                     make_view(data.data(), DType::e4m3, {2, 4, 1, 48}),
                     make_view(scales.data(), DType::e8m0, {2, 4, 1, 2}), ScaleMode::floor, t);
  EXPECT_NE(st.message().find("kv_len[1] = 9 is outside [0, 4]"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace mxattn
