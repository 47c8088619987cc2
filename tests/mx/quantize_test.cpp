// quantize / dequantize of whole tensors (spec §5 and 7): layouts along the head dim and along the
// keys, strided views, partial blocks, padding, non-finite blocks, validation messages, error
// bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/float16.h"
#include "mx/spec_formats.h"
#include "mxattn/mx.h"

namespace mxattn {
namespace {

using spec::ElementFormat;
using spec::kFormats;

constexpr uint8_t kSentinel = 0xab;

// Owned bytes plus a view with arbitrary strides over them.
struct Buffer {
  std::vector<uint8_t> bytes;
  TensorView view;

  Buffer(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
         int64_t extra_bytes = 0) {
    view.dtype = dtype;
    view.rank = int(shape.size());
    for (int i = 0; i < view.rank; ++i) view.shape[i] = shape[size_t(i)];
    set_contiguous_strides(view);
    for (size_t i = 0; i < strides.size(); ++i) view.stride[i] = strides[i];
    view.bytes = bytes_needed(view).value();
    bytes.assign(size_t(view.bytes + extra_bytes), kSentinel);
    view.data = bytes.data();
  }
  float* f32() { return reinterpret_cast<float*>(bytes.data()); }
};

int64_t offset_of(const TensorView& v, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (size_t i = 0; i < index.size(); ++i) offset += index[i] * v.stride[i];
  return offset;
}

// Reads a code by the packing rule of spec §5, written out here rather than through formats.h.
unsigned code_at(const TensorView& v, int64_t element) {
  const uint8_t* bytes = static_cast<const uint8_t*>(v.data);
  switch (bits_of(v.dtype)) {
    case 8:
      return bytes[element];
    case 4:
      return (bytes[element / 2] >> (4 * (element % 2))) & 0xfu;
    default: {
      const int64_t word = element / 4;
      const uint32_t bits = uint32_t(bytes[3 * word]) | uint32_t(bytes[3 * word + 1]) << 8 |
                            uint32_t(bytes[3 * word + 2]) << 16;
      return (bits >> (6 * (element % 4))) & 0x3fu;
    }
  }
}

int expected_exponent(const ElementFormat& f, double amax, ScaleMode mode) {
  if (amax == 0) return 0;
  int e;
  if (mode == ScaleMode::floor) {
    e = std::ilogb(amax) - f.emax;
  } else {
    e = std::ilogb(amax) - f.emax - 1;
    while (f.max_value * std::ldexp(1.0, e) < amax) ++e;
  }
  return std::clamp(e, -127, 127);
}

// Checks one block against spec §5: its scale from the finite amax, each element within half a
// quantum of x / 2^e (or saturated), non-finite values by the format's rule.
void check_block(const ElementFormat& f, ScaleMode mode, const std::vector<float>& x,
                 unsigned scale_byte, const std::vector<unsigned>& codes) {
  double amax = 0;
  bool nonfinite = false;
  for (float v : x) {
    if (std::isfinite(v)) {
      amax = std::max(amax, std::fabs(double(v)));
    } else {
      nonfinite = true;
    }
  }
  if (nonfinite && !f.ieee_inf_nan && !f.nan_is_all_ones) {
    ASSERT_EQ(scale_byte, 0xffu);
    for (unsigned c : codes) ASSERT_EQ(c, 0u);
    return;
  }
  const int e = expected_exponent(f, amax, mode);
  ASSERT_EQ(scale_byte, unsigned(127 + e)) << "amax " << amax;
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(i);
    const double decoded = spec::value_of(f, codes[i]);
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(decoded));
    } else if (std::isinf(x[i])) {
      if (f.ieee_inf_nan) {
        ASSERT_EQ(decoded, double(x[i]));
      } else {
        ASSERT_TRUE(std::isnan(decoded));
      }
    } else {
      const double y = std::ldexp(double(x[i]), -e);
      if (std::fabs(y) > f.max_value) {
        ASSERT_EQ(mode, ScaleMode::floor) << "rceil never saturates";
        ASSERT_EQ(decoded, std::copysign(f.max_value, y));
      } else {
        ASSERT_LE(std::fabs(decoded - y), spec::quantum_at(f, std::fabs(y)) / 2) << "x " << x[i];
        ASSERT_EQ(std::signbit(decoded), std::signbit(y));
      }
    }
  }
}

// Fills a logical f32 tensor with values whose magnitudes span many binades, so blocks differ in
// scale and every block has tiny elements that land in the subnormal codes.
void fill_random(Buffer& src, std::mt19937_64& rng, int spread) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> binade(-spread, spread);
  std::vector<int64_t> index(size_t(src.view.rank), 0);
  const int64_t n = src.view.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    for (int a = src.view.rank - 1; a >= 0; --a) {
      index[size_t(a)] = rest % src.view.shape[a];
      rest /= src.view.shape[a];
    }
    src.f32()[offset_of(src.view, index)] = std::ldexp(normal(rng), binade(rng));
  }
}

// For every block of the logical shape along `axis`: gathers src, codes and scale, checks them, and
// checks that dequantize gave code * 2^(e - 127) exactly.
void check_all_blocks(const ElementFormat& f, ScaleMode mode, const Buffer& src, const Buffer& data,
                      const Buffer& scales, int axis, const Buffer* dst) {
  const TensorView& s = src.view;
  std::vector<int64_t> index(size_t(s.rank), 0);
  std::vector<int64_t> block_shape(s.shape, s.shape + s.rank);
  block_shape[size_t(axis)] = (s.shape[axis] + 31) / 32;
  int64_t block_count = 1;
  for (int64_t d : block_shape) block_count *= d;
  for (int64_t b = 0; b < block_count; ++b) {
    int64_t rest = b;
    for (int a = s.rank - 1; a >= 0; --a) {
      index[size_t(a)] = rest % block_shape[size_t(a)];
      rest /= block_shape[size_t(a)];
    }
    const unsigned scale_byte =
        static_cast<const uint8_t*>(scales.view.data)[offset_of(scales.view, index)];
    std::vector<int64_t> element = index;
    std::vector<float> x;
    std::vector<unsigned> codes;
    const int64_t first = index[size_t(axis)] * 32;
    for (int64_t k = first; k < std::min(first + 32, s.shape[axis]); ++k) {
      element[size_t(axis)] = k;
      x.push_back(reinterpret_cast<const float*>(s.data)[offset_of(s, element)]);
      codes.push_back(code_at(data.view, offset_of(data.view, element)));
      if (dst) {
        const float got =
            reinterpret_cast<const float*>(dst->view.data)[offset_of(dst->view, element)];
        const double want = spec::value_of(f, codes.back()) * spec::scale_value(scale_byte);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got));
        } else {
          ASSERT_EQ(double(got), want);
        }
      }
    }
    SCOPED_TRACE("block " + std::to_string(b));
    check_block(f, mode, x, scale_byte, codes);
  }
}

const ScaleMode kModes[] = {ScaleMode::floor, ScaleMode::rceil};

TEST(Quantize, HeadDimAxisAllFormatsBothModes) {
  const uint64_t seed = 1001;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const ElementFormat& f : kFormats) {
    for (ScaleMode mode : kModes) {
      SCOPED_TRACE(std::string(f.name) + (mode == ScaleMode::floor ? " floor" : " rceil"));
      Buffer src(DType::f32, {2, 3, 4, 96});
      fill_random(src, rng, 12);
      Buffer data(f.type, {2, 3, 4, 96});
      Buffer scales(DType::e8m0, {2, 3, 4, 3});
      ASSERT_TRUE(quantize(src.view, data.view, scales.view, 3, mode));
      Buffer dst(DType::f32, {2, 3, 4, 96});
      ASSERT_TRUE(dequantize(data.view, scales.view, 3, dst.view));
      check_all_blocks(f, mode, src, data, scales, 3, &dst);
    }
  }
}

// V along the keys: data [B, Sk, Hkv, Dv], scales stored [B, Hkv, ceil(Sk/32), Dv] and passed as
// permuted(view, {0, 2, 1, 3}); src itself a strided view of [B, Hkv, Sk, Dv] storage.
TEST(Quantize, KeysAxisWithPermutedScalesAndPartialBlock) {
  const uint64_t seed = 1002;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t batch = 2, keys = 70, heads = 3, dim = 64, blocks = 3;
  for (const ElementFormat& f : kFormats) {
    for (ScaleMode mode : kModes) {
      SCOPED_TRACE(std::string(f.name) + (mode == ScaleMode::floor ? " floor" : " rceil"));
      Buffer src(DType::f32, {batch, keys, heads, dim}, {heads * keys * dim, dim, keys * dim, 1});
      fill_random(src, rng, 6);
      Buffer data(f.type, {batch, keys, heads, dim});
      Buffer scale_storage(DType::e8m0, {batch, heads, blocks, dim});
      Buffer scales = scale_storage;
      scales.view = permuted(scale_storage.view, {0, 2, 1, 3});
      scales.view.data = scales.bytes.data();
      ASSERT_EQ(scales.view.shape[1], blocks);
      ASSERT_TRUE(quantize(src.view, data.view, scales.view, 1, mode));
      Buffer dst(DType::f32, {batch, keys, heads, dim});
      ASSERT_TRUE(dequantize(data.view, scales.view, 1, dst.view));
      check_all_blocks(f, mode, src, data, scales, 1, &dst);
    }
  }
}

TEST(Quantize, PaddingIsZeroFilledAndNothingPastTheViewIsWritten) {
  const uint64_t seed = 1003;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    // Along the head dim: 40 logical elements (a partial block of 8) in rows of 64, scales rows
    // of 4.
    Buffer src(DType::f32, {2, 3, 40});
    fill_random(src, rng, 4);
    const int64_t extra = 16;
    Buffer data(f.type, {2, 3, 64}, {}, extra);
    Buffer scales(DType::e8m0, {2, 3, 4}, {}, extra);
    ASSERT_TRUE(quantize(src.view, data.view, scales.view, 2, ScaleMode::floor));
    for (int64_t row = 0; row < 6; ++row) {
      for (int64_t k = 40; k < 64; ++k) ASSERT_EQ(code_at(data.view, row * 64 + k), 0u) << row;
      EXPECT_EQ(scales.bytes[size_t(row * 4 + 2)], 0);
      EXPECT_EQ(scales.bytes[size_t(row * 4 + 3)], 0);
    }
    for (int64_t i = 0; i < extra; ++i) {
      EXPECT_EQ(data.bytes[size_t(data.view.bytes + i)], kSentinel);
      EXPECT_EQ(scales.bytes[size_t(scales.view.bytes + i)], kSentinel);
    }
    check_all_blocks(f, ScaleMode::floor, src, data, scales, 2, nullptr);

    // Along the keys: 70 logical keys in a cache of 100, scales for 5 blocks where 3 are needed.
    Buffer keys_src(DType::f32, {2, 70, 3, 32});
    fill_random(keys_src, rng, 4);
    Buffer keys_data(f.type, {2, 100, 3, 32});
    Buffer scale_storage(DType::e8m0, {2, 3, 5, 32});
    TensorView keys_scales = permuted(scale_storage.view, {0, 2, 1, 3});
    ASSERT_TRUE(quantize(keys_src.view, keys_data.view, keys_scales, 1, ScaleMode::rceil));
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t h = 0; h < 3; ++h) {
        for (int64_t d = 0; d < 32; ++d) {
          for (int64_t k = 70; k < 100; ++k) {
            ASSERT_EQ(code_at(keys_data.view, offset_of(keys_data.view, {b, k, h, d})), 0u);
          }
          for (int64_t blk = 3; blk < 5; ++blk) {
            ASSERT_EQ(scale_storage.bytes[size_t(offset_of(scale_storage.view, {b, h, blk, d}))],
                      0);
          }
        }
      }
    }
  }
}

TEST(Quantize, NonFiniteAndAllZeroBlocks) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    Buffer src(DType::f32, {4, 32});
    for (int64_t i = 0; i < 128; ++i) src.f32()[i] = float(i % 32) * 0.25f - 3.0f;
    src.f32()[5] = nan;
    src.f32()[32 + 7] = inf;
    src.f32()[64 + 9] = -inf;
    for (int64_t i = 96; i < 128; ++i) src.f32()[i] = 0.0f;
    Buffer data(f.type, {4, 32});
    Buffer scales(DType::e8m0, {4, 1});
    ASSERT_TRUE(quantize(src.view, data.view, scales.view, 1, ScaleMode::floor));
    Buffer dst(DType::f32, {4, 32});
    ASSERT_TRUE(dequantize(data.view, scales.view, 1, dst.view));
    check_all_blocks(f, ScaleMode::floor, src, data, scales, 1, &dst);
    const bool block_nan = !f.ieee_inf_nan && !f.nan_is_all_ones;
    for (int64_t i = 0; i < 96; ++i) {
      SCOPED_TRACE(i);
      const float got = dst.f32()[i];
      if (block_nan || i == 5 || (f.nan_is_all_ones && (i == 39 || i == 73))) {
        EXPECT_TRUE(std::isnan(got));
      } else if (i == 39 || i == 73) {
        EXPECT_EQ(got, src.f32()[i]);
      } else {
        EXPECT_TRUE(std::isfinite(got));
      }
    }
    EXPECT_EQ(scales.bytes[3], 127);
    for (int64_t i = 96; i < 128; ++i) {
      EXPECT_EQ(code_at(data.view, i), 0u);
      EXPECT_EQ(dst.f32()[i], 0.0f);
    }
  }
}

TEST(Quantize, DequantizeToHalfTypes) {
  const uint64_t seed = 1004;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const ElementFormat& f : kFormats) {
    SCOPED_TRACE(f.name);
    Buffer src(DType::f32, {3, 64});
    fill_random(src, rng, 3);
    Buffer data(f.type, {3, 64});
    Buffer scales(DType::e8m0, {3, 2});
    ASSERT_TRUE(quantize(src.view, data.view, scales.view, 1, ScaleMode::floor));
    Buffer exact(DType::f32, {3, 64});
    ASSERT_TRUE(dequantize(data.view, scales.view, 1, exact.view));
    Buffer half(DType::f16, {3, 64});
    Buffer brain(DType::bf16, {3, 64});
    ASSERT_TRUE(dequantize(data.view, scales.view, 1, half.view));
    ASSERT_TRUE(dequantize(data.view, scales.view, 1, brain.view));
    for (int64_t i = 0; i < 192; ++i) {
      uint16_t h, b;
      std::memcpy(&h, half.bytes.data() + 2 * i, 2);
      std::memcpy(&b, brain.bytes.data() + 2 * i, 2);
      EXPECT_EQ(h, base::float_to_f16(exact.f32()[i]));
      EXPECT_EQ(b, base::float_to_bf16(exact.f32()[i]));
    }
    // f16 and bf16 sources quantize their exact values.
    Buffer src_half(DType::f16, {3, 64});
    for (int64_t i = 0; i < 192; ++i) {
      const uint16_t h = base::float_to_f16(src.f32()[i]);
      std::memcpy(src_half.bytes.data() + 2 * i, &h, 2);
      src.f32()[i] = base::f16_to_float(h);
    }
    Buffer data_half(f.type, {3, 64});
    Buffer scales_half(DType::e8m0, {3, 2});
    ASSERT_TRUE(quantize(src_half.view, data_half.view, scales_half.view, 1, ScaleMode::floor));
    ASSERT_TRUE(quantize(src.view, data.view, scales.view, 1, ScaleMode::floor));
    EXPECT_EQ(data_half.bytes, data.bytes);
    EXPECT_EQ(scales_half.bytes, scales.bytes);
  }
}

// Expects `status` to fail with exactly `message` and the outputs to hold their sentinel bytes.
void expect_rejected(const Status& status, const std::string& message,
                     std::initializer_list<const Buffer*> outputs) {
  EXPECT_FALSE(status);
  EXPECT_EQ(status.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(status.message(), message);
  for (const Buffer* out : outputs) {
    for (uint8_t byte : out->bytes) ASSERT_EQ(byte, kSentinel);
  }
}

TEST(Quantize, LogicalSizeScalesAcceptedOneByteLessRejected) {
  Buffer src(DType::f32, {1, 16, 8, 128});
  for (int64_t i = 0; i < src.view.numel(); ++i) src.f32()[i] = float(i % 13) - 6.0f;
  Buffer data(DType::e4m3, {1, 16, 8, 128});
  Buffer scales(DType::e8m0, {1, 16, 8, 4});
  ASSERT_EQ(scales.view.bytes, 512);
  EXPECT_TRUE(quantize(src.view, data.view, scales.view, 3, ScaleMode::floor));
  Buffer dst(DType::f32, {1, 16, 8, 128});
  EXPECT_TRUE(dequantize(data.view, scales.view, 3, dst.view));

  Buffer fresh_data(DType::e4m3, {1, 16, 8, 128});
  Buffer short_scales(DType::e8m0, {1, 16, 8, 4});
  short_scales.view.bytes = 511;
  expect_rejected(quantize(src.view, fresh_data.view, short_scales.view, 3, ScaleMode::floor),
                  "scales need 512 bytes for shape [1, 16, 8, 4] but only 511 are backed",
                  {&fresh_data, &short_scales});
  Buffer fresh_dst(DType::f32, {1, 16, 8, 128});
  TensorView short_scales_in = scales.view;
  short_scales_in.bytes = 511;
  expect_rejected(dequantize(data.view, short_scales_in, 3, fresh_dst.view),
                  "scales need 512 bytes for shape [1, 16, 8, 4] but only 511 are backed",
                  {&fresh_dst});

  // The keys layout: a permuted view of [B, Hkv, ceil(Sk/32), Dv] storage needs the storage's
  // bytes.
  Buffer v(DType::f32, {1, 40, 2, 32});
  Buffer v_data(DType::e2m1, {1, 40, 2, 32});
  Buffer scale_storage(DType::e8m0, {1, 2, 2, 32});
  TensorView v_scales = permuted(scale_storage.view, {0, 2, 1, 3});
  v_scales.bytes = 127;
  expect_rejected(quantize(v.view, v_data.view, v_scales, 1, ScaleMode::floor),
                  "scales need 128 bytes for shape [1, 2, 2, 32] but only 127 are backed",
                  {&v_data, &scale_storage});
  TensorView short_data = v_data.view;
  short_data.bytes -= 1;
  expect_rejected(
      quantize(v.view, short_data, permuted(scale_storage.view, {0, 2, 1, 3}), 1, ScaleMode::floor),
      "data needs 1280 bytes for shape [1, 40, 2, 32] but only 1279 are backed",
      {&v_data, &scale_storage});
}

TEST(Quantize, RejectsInconsistentArguments) {
  Buffer src(DType::f32, {2, 64});
  Buffer data(DType::e2m3, {2, 64});
  Buffer scales(DType::e8m0, {2, 2});
  const auto q = [&](const TensorView& s, const TensorView& d, const TensorView& sc, int axis) {
    return quantize(s, d, sc, axis, ScaleMode::floor);
  };
  TensorView wrong = src.view;
  wrong.dtype = DType::i32;
  expect_rejected(q(wrong, data.view, scales.view, 1), "src must be f32, f16 or bf16 but is i32",
                  {&data, &scales});
  wrong = data.view;
  wrong.dtype = DType::bf16;
  expect_rejected(q(src.view, wrong, scales.view, 1),
                  "data must be an MX element type (e4m3, e5m2, e2m3, e3m2, e2m1) but is bf16",
                  {&scales});
  Buffer u8_scales(DType::e4m3, {2, 2});
  expect_rejected(q(src.view, data.view, u8_scales.view, 1), "scales must be e8m0 but are e4m3",
                  {&data, &u8_scales});
  expect_rejected(q(src.view, data.view, scales.view, 2), "axis 2 is outside [0, 2)",
                  {&data, &scales});
  expect_rejected(q(src.view, data.view, scales.view, -1), "axis -1 is outside [0, 2)",
                  {&data, &scales});
  Buffer few_scales(DType::e8m0, {2, 1});
  expect_rejected(q(src.view, data.view, few_scales.view, 1),
                  "scales must have shape [2, 2] (longer along axis 1 allowed) but has [2, 1]",
                  {&data, &few_scales});
  Buffer short_data(DType::e2m3, {2, 60});
  expect_rejected(q(src.view, short_data.view, scales.view, 1),
                  "data must have shape [2, 64] (longer along axis 1 allowed) but has [2, 60]",
                  {&short_data, &scales});
  Buffer flat_scales(DType::e8m0, {4});
  expect_rejected(q(src.view, data.view, flat_scales.view, 1),
                  "scales has rank 1 but the tensor has rank 2", {&data, &flat_scales});
  // A packed row that does not start on a byte: rows 62 elements apart.
  Buffer odd_rows(DType::e2m3, {2, 64}, {62, 1});
  expect_rejected(q(src.view, odd_rows.view, scales.view, 1),
                  "data is e2m3 (packed 4 to a group): the stride of axis 0 must be a multiple "
                  "of 4, found strides [62, 1]",
                  {&odd_rows, &scales});
  TensorView absent;
  expect_rejected(q(src.view, data.view, absent, 1), "scales is not given", {&data});
  TensorView null_data = data.view;
  null_data.data = nullptr;
  expect_rejected(q(src.view, null_data, scales.view, 1),
                  "data has a null data pointer but needs 96 bytes", {&scales});
  TensorView negative = src.view;
  negative.stride[0] = -64;
  expect_rejected(q(negative, data.view, scales.view, 1),
                  "src strides must be >= 0, found [-64, 1] for shape [2, 64]", {&data, &scales});
  Buffer dst(DType::e4m3, {2, 64});
  expect_rejected(dequantize(data.view, scales.view, 1, dst.view),
                  "dst must be f32, f16 or bf16 but is e4m3", {&dst});
}

TEST(Quantize, EmptyTensorsOnlyPad) {
  Buffer src(DType::f32, {3, 0});
  Buffer data(DType::e2m1, {3, 4});
  Buffer scales(DType::e8m0, {3, 1});
  ASSERT_TRUE(quantize(src.view, data.view, scales.view, 1, ScaleMode::floor));
  for (uint8_t byte : data.bytes) EXPECT_EQ(byte, 0);
  for (uint8_t byte : scales.bytes) EXPECT_EQ(byte, 0);
}

}  // namespace
}  // namespace mxattn
