// The fast engine's row decoding, exhaustively, on every kernel set of this CPU: every E4M3, E5M2,
// E2M3, E3M2 and E2M1 code times every E8M0 scale is mx::decode(code) * mx::decode_scale(scale),
// through convert_rows (blocks along the row and one scale per element) and, in the sets that
// have them, through the kernels that read rows directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/float16.h"
#include "cpu/aligned.h"
#include "cpu/fast.h"
#include "cpu/fast_rows.h"
#include "cpu/row_tile_scratch.h"
#include "cpu/runners.h"
#include "mx/formats.h"

namespace mxattn::test {
namespace {

constexpr DType kMxTypes[] = {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1};

float reference_value(DType t, uint8_t code, uint8_t scale) {
  return mx::decode(t, code) * mx::decode_scale(scale);
}

// Bit for bit, or both NaN; with `signed_zero` false, -0 and +0 also match (a dot product or a
// sum starting from +0 cannot give -0).
::testing::AssertionResult same_value(float want, float got, bool signed_zero) {
  if (std::isnan(want) && std::isnan(got)) return ::testing::AssertionSuccess();
  if (!signed_zero && want == 0.0f && got == 0.0f) return ::testing::AssertionSuccess();
  if (std::memcmp(&want, &got, sizeof(float)) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << want << ", got " << got;
}

// A packed row holding codes[0..n) (zero codes after them up to `width`).
std::vector<uint8_t> pack_row(DType t, const std::vector<uint8_t>& codes, int64_t width) {
  std::vector<uint8_t> row(size_t(width * bits_of(t) / 8), 0);
  for (size_t d = 0; d < codes.size(); ++d) mx::store_code(t, row.data(), int64_t(d), codes[d]);
  return row;
}

int64_t code_count(DType t) {
  return int64_t(1) << bits_of(t);
}

class RowDecoding : public ::testing::TestWithParam<cpu::SimdIsa> {};

// One row of every code per scale: row s has all its blocks scaled by s.
TEST_P(RowDecoding, ConvertRowsWithBlocksAlongTheRow) {
  const cpu::FastKernels& kernels = cpu::fast_kernels(GetParam());
  for (DType t : kMxTypes) {
    SCOPED_TRACE(name_of(t));
    const int64_t codes = code_count(t);
    const int64_t width = (codes + 31) / 32 * 32, blocks = width / 32;
    std::vector<uint8_t> all(static_cast<size_t>(codes));
    for (int64_t c = 0; c < codes; ++c) all[size_t(c)] = uint8_t(c);
    const std::vector<uint8_t> row = pack_row(t, all, width);
    std::vector<uint8_t> scales(size_t(256 * blocks));
    std::vector<cpu::RowSource> sources(256);
    for (int s = 0; s < 256; ++s) {
      for (int64_t b = 0; b < blocks; ++b) scales[size_t(s * blocks + b)] = uint8_t(s);
      sources[size_t(s)] = {row.data(), scales.data() + s * blocks};
    }
    const cpu::RowTables tables(t);
    std::vector<float> out(size_t(256 * width));
    kernels.convert_rows(tables.format(width, 1, 32, 1), sources.data(), 256, out.data(), width);
    for (int s = 0; s < 256; ++s)
      for (int64_t c = 0; c < codes; ++c) {
        SCOPED_TRACE(::testing::Message() << "code " << c << " scale " << s);
        ASSERT_TRUE(same_value(reference_value(t, uint8_t(c), uint8_t(s)),
                               out[size_t(s * width + c)], true));
      }
  }
}

// V scales along the keys: one scale per element, element d of row s scaled by (s + d) % 256, so
// that the rows together pair every code with every scale.
TEST_P(RowDecoding, ConvertRowsWithOneScalePerElement) {
  const cpu::FastKernels& kernels = cpu::fast_kernels(GetParam());
  std::vector<uint8_t> cycle(512);
  for (size_t i = 0; i < cycle.size(); ++i) cycle[i] = uint8_t(i % 256);
  for (DType t : kMxTypes) {
    SCOPED_TRACE(name_of(t));
    const int64_t codes = code_count(t);
    // Every code at every element position modulo 256: whole cycles of codes across the row.
    const int64_t width = 256;
    std::vector<uint8_t> pattern(static_cast<size_t>(width));
    for (int64_t d = 0; d < width; ++d) pattern[size_t(d)] = uint8_t(d % codes);
    const std::vector<uint8_t> row = pack_row(t, pattern, width);
    std::vector<cpu::RowSource> sources(256);
    for (int s = 0; s < 256; ++s) sources[size_t(s)] = {row.data(), cycle.data() + s};
    const cpu::RowTables tables(t);
    std::vector<float> out(size_t(256 * width));
    kernels.convert_rows(tables.format(width, 1, 1, 1), sources.data(), 256, out.data(), width);
    for (int s = 0; s < 256; ++s)
      for (int64_t d = 0; d < width; ++d) {
        const uint8_t code = pattern[size_t(d)], scale = uint8_t((s + d) % 256);
        SCOPED_TRACE(::testing::Message() << "code " << int(code) << " scale " << int(scale));
        ASSERT_TRUE(same_value(reference_value(t, code, scale), out[size_t(s * width + d)], true));
      }
  }
}

// The kernels that read FP8 rows directly, in the sets that have them. 32 keys share a scale; key j
// holds code c0 + j at element j and zero codes elsewhere, so that a NaN or an infinity stays in
// its own column. Query row i is the unit vector of element i: score (i, j) is key j's element i.
// With every weight 1, output column j is key j's element j plus zeros.
class DirectRowDecoding : public ::testing::TestWithParam<cpu::SimdIsa> {
 protected:
  static constexpr int64_t kKeys = 32, kWidth = 32;

  // scores_from_rows and accumulate_from_rows on the kKeys rows of `sources` (kWidth elements in
  // `format`), key j holding value_of(j) at element j and zeros elsewhere, against the unit-vector
  // queries, every weight 1.
  void expect_unit_results(const cpu::RowFormat& format, const std::vector<cpu::RowSource>& sources,
                           const std::function<float(int64_t)>& value_of) {
    const cpu::FastKernels& kernels = cpu::fast_kernels(GetParam());
    // Even/odd order of the queries: element 2m at m, element 2m + 1 at 16 + m.
    alignas(64) float q[kKeys * kWidth] = {};
    for (int64_t i = 0; i < kKeys; ++i) q[i * kWidth + (i % 2) * 16 + i / 2] = 1.0f;
    const std::vector<float> weights(static_cast<size_t>(kKeys), 1.0f);
    const float rescale = 1.0f;
    const cpu::RowStream stream{sources.data(), kKeys, 1, nullptr, 0};
    std::vector<float> scores(static_cast<size_t>(kKeys * kKeys));
    kernels.scores_from_rows(format, stream, q, kWidth, kKeys, scores.data(), kKeys);
    alignas(64) float out[kWidth] = {};
    kernels.accumulate_from_rows(format, stream, weights.data(), kKeys, &rescale, 1, out, kWidth);
    for (int64_t i = 0; i < kKeys; ++i) {
      const float value = value_of(i);
      ASSERT_TRUE(same_value(value, out[i], false)) << "output column " << i;
      for (int64_t j = 0; j < kKeys; ++j) {
        // Off the diagonal, 0 times key j's value: NaN when that is not finite.
        const float key_value = value_of(j);
        const float want = i == j ? value : std::isfinite(key_value) ? 0.0f : NAN;
        ASSERT_TRUE(same_value(want, scores[size_t(i * kKeys + j)], false))
            << "score of query " << i << " and key " << j;
      }
    }
  }
};

TEST_P(DirectRowDecoding, EveryFp8CodeAndScale) {
  for (DType t : {DType::e4m3, DType::e5m2}) {
    SCOPED_TRACE(name_of(t));
    const cpu::RowTables tables(t);
    const cpu::RowFormat format = tables.format(kWidth, 1, 32, 1);
    std::vector<uint8_t> rows(static_cast<size_t>(kKeys * kWidth));
    std::vector<cpu::RowSource> sources(static_cast<size_t>(kKeys));
    for (int scale = 0; scale < 256; ++scale) {
      const uint8_t block_scale = uint8_t(scale);
      for (int c0 = 0; c0 < 256; c0 += kKeys) {
        SCOPED_TRACE(::testing::Message() << "scale " << scale << " codes from " << c0);
        std::fill(rows.begin(), rows.end(), uint8_t(0));
        for (int64_t j = 0; j < kKeys; ++j) {
          rows[size_t(j * kWidth + j)] = uint8_t(c0 + j);
          sources[size_t(j)] = {rows.data() + j * kWidth, &block_scale};
        }
        expect_unit_results(format, sources, [&](int64_t j) {
          return reference_value(t, uint8_t(c0 + j), block_scale);
        });
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The same kernels on contiguous f16 rows: every f16 value (NaNs, infinities and subnormals
// included), as above, key j holding value c0 + j at element j.
TEST_P(DirectRowDecoding, EveryF16Value) {
  const cpu::RowTables tables(DType::f16);
  const cpu::RowFormat format = tables.format(kWidth, 1, 32, 0);
  std::vector<uint16_t> rows(static_cast<size_t>(kKeys * kWidth));
  std::vector<cpu::RowSource> sources(static_cast<size_t>(kKeys));
  for (int c0 = 0; c0 < 65536; c0 += kKeys) {
    SCOPED_TRACE(::testing::Message() << "values from " << c0);
    std::fill(rows.begin(), rows.end(), uint16_t(0));
    for (int64_t j = 0; j < kKeys; ++j) {
      rows[size_t(j * kWidth + j)] = uint16_t(c0 + j);
      sources[size_t(j)] = {reinterpret_cast<const uint8_t*>(rows.data() + j * kWidth), nullptr};
    }
    expect_unit_results(format, sources,
                        [&](int64_t j) { return base::f16_to_float(uint16_t(c0 + j)); });
    if (HasFatalFailure()) return;
  }
}

// scores_bf16_from_rows, in the sets that have it: bf16 unit-vector queries against FP8 keys of
// one code each, as above, over rows of 256 elements (two chunks of 128) and of 128 (one chunk,
// which the kernels take with the queries held in registers), whose blocks have different
// scales, so that each block's scale must reach its own elements. With n = width / 32, key j
// holds code c0 + j at element n j + j % n (block j n / 32); query row i is the unit vector of
// element n i + i % n. The block scales multiply the block sums, so off the diagonal a score is
// NaN only where a code or a scale of its key is (an overflowing code times scale gives 0 there,
// as in the f64 reference), and a NaN scale makes its whole block NaN, zero codes included.
TEST_P(DirectRowDecoding, EveryFp8CodeAndScaleAsBf16DotProducts) {
  const cpu::FastKernels& kernels = cpu::fast_kernels(GetParam());
  if (!kernels.scores_bf16_from_rows) GTEST_SKIP() << "no bf16 dot products in this set";
  constexpr int64_t kMaxWidth = 256;
  for (const int64_t width : {int64_t(256), int64_t(128)}) {
    const int64_t blocks = width / 32, spacing = blocks;
    const auto element_of = [&](int64_t j) { return spacing * j + j % spacing; };
    for (DType t : {DType::e4m3, DType::e5m2}) {
      SCOPED_TRACE(::testing::Message() << name_of(t) << ", rows of " << width);
      const cpu::RowTables tables(t);
      const cpu::RowFormat format = tables.format(width, 1, 32, 1);
      alignas(64) uint16_t q[kKeys * kMaxWidth] = {};
      for (int64_t i = 0; i < kKeys; ++i) {
        q[i * width + cpu::bf16_dot_position(format.elem, element_of(i))] = 0x3f80;  // 1.0
      }
      std::vector<uint8_t> rows(static_cast<size_t>(kKeys * width));
      std::vector<uint8_t> scales(static_cast<size_t>(kKeys * blocks));
      std::vector<cpu::RowSource> sources(static_cast<size_t>(kKeys));
      for (int scale = 0; scale < 256; ++scale) {
        for (int c0 = 0; c0 < 256; c0 += kKeys) {
          SCOPED_TRACE(::testing::Message() << "scales from " << scale << " codes from " << c0);
          std::fill(rows.begin(), rows.end(), uint8_t(0));
          for (int64_t j = 0; j < kKeys; ++j) {
            rows[size_t(j * width + element_of(j))] = uint8_t(c0 + j);
            for (int64_t b = 0; b < blocks; ++b) {
              scales[size_t(j * blocks + b)] = uint8_t((scale + 37 * b) % 256);
            }
            sources[size_t(j)] = {rows.data() + j * width, scales.data() + j * blocks};
          }
          const cpu::RowStream stream{sources.data(), kKeys, 1, nullptr, 0};
          std::vector<float> scores(static_cast<size_t>(kKeys * kKeys));
          kernels.scores_bf16_from_rows(format, stream, q, width, kKeys, 1.0f, scores.data(),
                                        kKeys);
          for (int64_t j = 0; j < kKeys; ++j) {
            const uint8_t code = uint8_t(c0 + j);
            const uint8_t block_scale = scales[size_t(j * blocks + element_of(j) / 32)];
            bool nan_scale = false;
            for (int64_t b = 0; b < blocks; ++b) {
              nan_scale = nan_scale || scales[size_t(j * blocks + b)] == 0xff;
            }
            for (int64_t i = 0; i < kKeys; ++i) {
              float want = i == j ? reference_value(t, code, block_scale) : 0.0f;
              if (nan_scale || (i != j && !std::isfinite(mx::decode(t, code)))) want = NAN;
              ASSERT_TRUE(same_value(want, scores[size_t(i * kKeys + j)], false))
                  << "score of query " << i << " and key " << j;
            }
          }
        }
      }
    }
  }
}

// One key tile through the AMX set's few-row tile kernel (attend_rows_bf16, RowTileStep): `count`
// K and V rows of an FP8 format, `width` elements a row (whole blocks of 32), for 4 query rows,
// with the kernel's state and scratch. run() sets the state to fixed values first; unchanged()
// tells whether a run left it so; key_rows() and value_rows() are the kernel's bf16 copies of the
// rows.
class RowTile {
 public:
  static constexpr int64_t kRows = 4;
  RowTile(int64_t count, int64_t width)
      : count_(count),
        width_(width),
        scratch_(count, kRows, width, width),
        q_tiles_(cpu::zeroed<uint32_t>(width / 2 * kRows)),
        out_(cpu::zeroed<float>(kRows * width)) {
    // Q: 1 in the odd elements of each row (bf16 pairs), 0 in the even ones.
    for (int64_t i = 0; i < width / 2 * kRows; ++i) q_tiles_[size_t(i)] = 0x3f800000u;
  }

  bool run(const cpu::FastKernels& kernels, const cpu::RowFormat& format,
           const std::vector<cpu::RowSource>& keys, const std::vector<cpu::RowSource>& values) {
    std::fill(out_.get(), out_.get() + kRows * width_, 0.5f);
    std::fill(row_max_, row_max_ + kRows, 3.0f);
    std::fill(row_sum_, row_sum_ + kRows, 2.0f);
    std::fill(rescale_, rescale_ + kRows, 7.0f);
    cpu::RowTileStep step;
    step.key_format = step.value_format = &format;
    step.keys = {keys.data(), count_, 1, nullptr, 0};
    step.values = {values.data(), count_, 1, nullptr, 0};
    step.q_tiles = q_tiles_.get();
    step.rows = step.row_block = kRows;
    step.dim_qk_padded = step.dim_v_padded = width_;
    step.score_factor = 0.125f;
    step.row_max = row_max_;
    step.row_sum = row_sum_;
    step.rescale = rescale_;
    step.out = out_.get();
    step.out_stride = width_;
    scratch_.attach(step);
    const bool taken = kernels.attend_rows_bf16(step);
    kernels.release_tiles();
    return taken;
  }

  bool unchanged() const {
    return std::all_of(out_.get(), out_.get() + kRows * width_,
                       [](float x) { return x == 0.5f; }) &&
           std::all_of(row_max_, row_max_ + kRows, [](float x) { return x == 3.0f; }) &&
           std::all_of(row_sum_, row_sum_ + kRows, [](float x) { return x == 2.0f; }) &&
           std::all_of(rescale_, rescale_ + kRows, [](float x) { return x == 7.0f; });
  }
  int64_t padded_keys() const { return scratch_.keys_padded(); }
  const uint16_t* key_rows() const { return scratch_.key_rows(); }
  const uint16_t* value_rows() const { return scratch_.value_rows(); }

 private:
  int64_t count_, width_;
  cpu::RowTileScratch scratch_;
  cpu::Aligned<uint32_t> q_tiles_;
  cpu::Aligned<float> out_;
  float row_max_[kRows], row_sum_[kRows], rescale_[kRows];
};

// The AMX set's few-row tile kernel decodes FP8 rows to bf16 with the E8M0 scale added to the
// exponent, exact only for scale bytes 17..239 and finite codes. A tile with another scale or a
// NaN or Inf code, in K or in V, in 64 codes that decode by shifts (all normal) or by tables (one
// zero among them), is declined before anything changes (the engine then runs the FMA kernels on
// it); every other tile is taken.
class RowTileKernel : public ::testing::TestWithParam<cpu::SimdIsa> {};

TEST_P(RowTileKernel, DeclinesUnsafeScalesAndNonFiniteCodes) {
  const cpu::FastKernels& kernels = cpu::fast_kernels(GetParam());
  constexpr int64_t kKeys = 64, kWidth = 64, kBlocks = kWidth / 32;
  for (DType t : {DType::e4m3, DType::e5m2}) {
    SCOPED_TRACE(name_of(t));
    const cpu::RowTables tables(t);
    const cpu::RowFormat format = tables.format(kWidth, 1, 32, 1);
    // K and V rows of small codes (magnitude bytes 0x08..0x2f), scales 120..127.
    std::vector<uint8_t> rows(size_t(2 * kKeys * kWidth)), scales(size_t(2 * kKeys * kBlocks));
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = uint8_t((i * 37 % 40 + 8) | (i % 3 ? 0 : 0x80));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = uint8_t(120 + i % 8);
    std::vector<cpu::RowSource> keys(static_cast<size_t>(kKeys)), values(keys.size());
    for (int64_t k = 0; k < kKeys; ++k) {
      keys[size_t(k)] = {rows.data() + k * kWidth, scales.data() + k * kBlocks};
      values[size_t(k)] = {rows.data() + (kKeys + k) * kWidth,
                           scales.data() + (kKeys + k) * kBlocks};
    }
    RowTile tile(kKeys, kWidth);
    ASSERT_TRUE(tile.run(kernels, format, keys, values))
        << "a tile of safe scales and finite codes";
    EXPECT_FALSE(tile.unchanged());
    // V rows of the first 32 keys are decoded with the scores, the others while the tile unit
    // multiplies the weights by V rows before them (past the softmax).
    for (const auto& [in_values, row] :
         {std::pair{false, 5}, std::pair{false, 50}, std::pair{true, 19}, std::pair{true, 50}}) {
      SCOPED_TRACE(std::string(in_values ? "in V" : "in K") + ", key " + std::to_string(row));
      const size_t key = size_t(in_values ? kKeys + row : row);
      for (const uint8_t scale : {0, 16, 17, 239, 240, 254, 255}) {
        const uint8_t saved = scales[key * kBlocks + 1];
        scales[key * kBlocks + 1] = scale;
        const bool safe = scale >= 17 && scale <= 239;
        EXPECT_EQ(tile.run(kernels, format, keys, values), safe) << "scale " << int(scale);
        if (!safe) {
          EXPECT_TRUE(tile.unchanged()) << "scale " << int(scale);
        }
        scales[key * kBlocks + 1] = saved;
      }
      const std::vector<uint8_t> non_finite = t == DType::e4m3
                                                  ? std::vector<uint8_t>{0x7f, 0xff}
                                                  : std::vector<uint8_t>{0x7c, 0xfc, 0x7d, 0xff};
      for (const bool tables_decode : {false, true}) {
        SCOPED_TRACE(tables_decode ? "decoded by tables" : "decoded by shifts");
        const uint8_t saved_zero = rows[key * kWidth + 11];
        if (tables_decode) rows[key * kWidth + 11] = 0;
        for (const uint8_t code : non_finite) {
          const uint8_t saved = rows[key * kWidth + 40];
          rows[key * kWidth + 40] = code;
          EXPECT_FALSE(tile.run(kernels, format, keys, values)) << "code " << int(code);
          EXPECT_TRUE(tile.unchanged()) << "code " << int(code);
          rows[key * kWidth + 40] = saved;
        }
        rows[key * kWidth + 11] = saved_zero;
      }
    }
  }
}

// The kernel's bf16 copies of FP8 rows are code * 2^(scale - 127) exactly, for every finite code,
// the extreme safe scales and scales between: 64 codes that are all normal decode by shifts, 64
// with a zero or subnormal among them by tables, and so do the 32 of a row's last half chunk.
// Rows past the last key are zero.
TEST_P(RowTileKernel, DecodesFp8RowsExactly) {
  const cpu::FastKernels& kernels = cpu::fast_kernels(GetParam());
  constexpr int64_t kKeys = 60;
  for (DType t : {DType::e4m3, DType::e5m2}) {
    SCOPED_TRACE(name_of(t));
    std::vector<uint8_t> finite, normal;
    for (int c = 0; c < 256; ++c) {
      if (!std::isfinite(mx::decode(t, uint8_t(c)))) continue;
      finite.push_back(uint8_t(c));
      const bool zero_exponent = (c & (t == DType::e4m3 ? 0x78 : 0x7c)) == 0;
      if (!zero_exponent) normal.push_back(uint8_t(c));
    }
    const cpu::RowTables tables(t);
    for (const int64_t width : {int64_t(128), int64_t(96)}) {
      SCOPED_TRACE(width);
      const int64_t blocks = width / 32;
      std::vector<uint8_t> rows(size_t(2 * kKeys * width)), scales(size_t(2 * kKeys * blocks));
      // Even rows: normal codes only. Odd rows: every finite code, with a zero or subnormal in
      // each 64 and in the half chunk.
      for (int64_t r = 0; r < 2 * kKeys; ++r) {
        const std::vector<uint8_t>& codes = r % 2 ? finite : normal;
        for (int64_t d = 0; d < width; ++d) {
          rows[size_t(r * width + d)] = codes[size_t((r * 53 + d) % int64_t(codes.size()))];
        }
        if (r % 2) {
          for (int64_t d = 5; d < width; d += 64)
            rows[size_t(r * width + d)] = uint8_t(0x80 + r % 4);
        }
      }
      for (size_t i = 0; i < scales.size(); ++i) {
        scales[i] = i % 7 == 0 ? 17 : i % 7 == 1 ? 239 : uint8_t(17 + i * 89 % 223);
      }
      std::vector<cpu::RowSource> keys(static_cast<size_t>(kKeys)), values(keys.size());
      for (int64_t k = 0; k < kKeys; ++k) {
        keys[size_t(k)] = {rows.data() + k * width, scales.data() + k * blocks};
        values[size_t(k)] = {rows.data() + (kKeys + k) * width,
                             scales.data() + (kKeys + k) * blocks};
      }
      const cpu::RowFormat format = tables.format(width, 1, 32, 1);
      RowTile tile(kKeys, width);
      ASSERT_TRUE(tile.run(kernels, format, keys, values));
      for (const bool in_values : {false, true}) {
        SCOPED_TRACE(in_values ? "V" : "K");
        const uint16_t* got = in_values ? tile.value_rows() : tile.key_rows();
        for (int64_t k = 0; k < tile.padded_keys(); ++k) {
          const int64_t r = (in_values ? kKeys : 0) + k;
          for (int64_t d = 0; d < width; ++d) {
            uint32_t want = 0;
            if (k < kKeys) {
              const uint8_t code = rows[size_t(r * width + d)];
              const float value = reference_value(t, code, scales[size_t(r * blocks + d / 32)]);
              want = std::bit_cast<uint32_t>(value);
              ASSERT_EQ(want & 0xffffu, 0u) << "not a bf16: code " << int(code);
            }
            ASSERT_EQ(uint32_t(got[k * width + d]), want >> 16) << "key " << k << ", element " << d;
          }
        }
      }
    }
  }
}

std::string isa_test_name(const ::testing::TestParamInfo<cpu::SimdIsa>& param) {
  return std::string(cpu::isa_name(param.param));
}

// The sets of this CPU with the kernels that read rows directly.
std::vector<cpu::SimdIsa> direct_isas() {
  std::vector<cpu::SimdIsa> isas;
  for (cpu::SimdIsa isa : cpu::supported_isas()) {
    if (cpu::fast_kernels(isa).scores_from_rows) isas.push_back(isa);
  }
  return isas;
}

// The sets with the AMX few-row tile kernel (the unit's, or emulated).
std::vector<cpu::SimdIsa> row_tile_isas() {
  std::vector<cpu::SimdIsa> isas;
  for (cpu::SimdIsa isa : cpu::checked_isas()) {
    if (cpu::fast_kernels(isa).attend_rows_bf16) isas.push_back(isa);
  }
  return isas;
}

INSTANTIATE_TEST_SUITE_P(KernelSets, RowDecoding, ::testing::ValuesIn(cpu::supported_isas()),
                         isa_test_name);
INSTANTIATE_TEST_SUITE_P(KernelSets, DirectRowDecoding, ::testing::ValuesIn(direct_isas()),
                         isa_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DirectRowDecoding);
INSTANTIATE_TEST_SUITE_P(KernelSets, RowTileKernel, ::testing::ValuesIn(row_tile_isas()),
                         isa_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RowTileKernel);

}  // namespace
}  // namespace mxattn::test
