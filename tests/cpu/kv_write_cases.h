// Random cache writes (spec §11) for the CPU and GPU tests: new K and V tokens with the values
// that stress a quantizer (NaN and Inf, all-zero rows, subnormal ranges, large magnitudes), caches
// filled with a sentinel, and a slot mapping that skips tokens and visits pages out of order; and
// the caches' expected bytes, made "by hand": each token quantized on its own by mxattn::quantize
// (or rounded) and copied to its slot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mxattn/kv_cache.h"

namespace mxattn::test {

struct KvCase {
  uint64_t seed = 1;
  int64_t tokens = 7;
  int64_t heads = 2;
  int64_t dim_k = 64;
  int64_t dim_v = 64;
  int64_t pages = 5;
  int64_t page_size = 16;
  DType src_type = DType::f32;
  DType k_type = DType::e4m3;
  DType v_type = DType::e4m3;
  ScaleMode mode = ScaleMode::floor;
  bool rotate_k = false;
  bool k_mean = false;
  bool slots_i64 = true;
  std::string describe() const;
};

// A random case with every cache format pair, source type and transform drawn from `seed`.
KvCase random_kv_case(uint64_t seed);

constexpr uint8_t kCacheSentinel = 0x5a;

// The host buffers of a case; args() views them.
struct KvBuffers {
  explicit KvBuffers(const KvCase& c);
  KvWriteArgs args() const;

  KvCase c;
  std::vector<uint8_t> k, v;  // [T, Hkv, D] of src_type
  std::vector<uint8_t> k_cache, v_cache, k_scales, v_scales;
  std::vector<int64_t> slots;  // also the int32 mapping's values
  std::vector<int32_t> slots32;
  std::vector<float> k_mean;  // [Hkv, Dqk]
};

// The caches (and scales) after the write, each token placed by hand.
struct KvExpected {
  std::vector<uint8_t> k_cache, v_cache, k_scales, v_scales;
};
KvExpected expected_after_write(const KvBuffers& b);

}  // namespace mxattn::test
