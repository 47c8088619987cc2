// The decode engine's fast MX decoders against formats.h, exhaustively on the GPU: every code at
// every position of a lane group (K path: exact f16 raw values), every code under every E8M0 scale
// (V path: the bf16 operand the kernel builds), and every E8M0 byte.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/float16.h"
#include "cuda/common/device_ops.cuh"
#include "cuda/common/kv_format.cuh"
#include "mx/formats.h"

namespace mxattn::cuda::detail {
namespace {

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// Group n sits at byte offset_of_group(n) of its 16-byte slot: FP6 groups alternate between an
// aligned start and one 2 bytes in, the two cases of load_group.
__host__ __device__ int offset_of_group(DType t, int64_t n) {
  return bits_of(t) == 6 && (n & 1) ? 2 : 0;
}

template <DType T>
__global__ void decode_groups_kernel(const uint8_t* groups, int64_t count, uint32_t* raw) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= count) return;
  uint32_t w[2];
  load_group<T>(groups + n * 16, offset_of_group(T, n), w);
  uint32_t out[4];
  decode_group<T>(w, out);
  for (int p = 0; p < 4; ++p) raw[n * 4 + p] = out[p];
}

// V operand: raw value times the E8M0 scale, rounded to bf16, as value_step builds it.
__global__ void scale_values_kernel(const uint32_t* raw, int64_t count, uint16_t* out) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= count * 256) return;
  const int64_t value = n / 256;
  const uint32_t e = uint32_t(n % 256);
  const float x = unpack_half<MmaType::f16>(raw[value / 2], int(value % 2)) * e8m0_value(e);
  out[n] = uint16_t(pack_pair<MmaType::bf16>(x, 0.0f) & 0xffffu);
}

__global__ void e8m0_kernel(float* out) {
  out[threadIdx.x] = e8m0_value(threadIdx.x);
}

// For each scale word: whether e8m0_end_bytes flags it, and e8m0_inner_value of each of its four
// bytes.
__global__ void e8m0_word_kernel(const uint32_t* words, int64_t count, uint8_t* ends,
                                 float* values) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= count) return;
  ends[n] = e8m0_end_bytes(words[n]) != 0u ? 1 : 0;
  for (int index = 0; index < 4; ++index) values[n * 4 + index] = e8m0_inner_value(words[n], index);
}

bool same_value(float want, float got) {
  if (std::isnan(want)) return std::isnan(got);
  return std::memcmp(&want, &got, 4) == 0;
}

// Writes the 8 codes of a group, in the storage packing of `t`, at byte `offset` of a zeroed
// 16-byte slot.
void pack_group(DType t, const uint8_t (&codes)[8], int offset, uint8_t* slot) {
  std::memset(slot, 0, 16);
  for (int k = 0; k < 8; ++k) mx::store_code(t, slot + offset, k, codes[k]);
}

template <DType T>
void check_format() {
  SCOPED_TRACE(std::string(name_of(T)));
  using Format = KvFormat<T>;
  const int codes = 1 << (1 + mx::format_info(T).ebits + mx::format_info(T).mbits);
  // Every code at every position, the other positions random (seed printed through the trace).
  const uint64_t seed = 20250 + uint64_t(T);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes;
  std::vector<std::array<uint8_t, 8>> groups;
  for (int c = 0; c < codes; ++c) {
    for (int pos = 0; pos < 8; ++pos) {
      uint8_t g[8];
      for (int k = 0; k < 8; ++k) g[k] = uint8_t(rng() % uint64_t(codes));
      g[pos] = uint8_t(c);
      const int64_t n = int64_t(groups.size());
      groups.push_back({g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]});
      bytes.resize(bytes.size() + 16);
      pack_group(T, g, offset_of_group(T, n), bytes.data() + bytes.size() - 16);
    }
  }
  const int64_t count = int64_t(groups.size());
  uint8_t* d_bytes = nullptr;
  uint32_t* d_raw = nullptr;
  uint16_t* d_scaled = nullptr;
  ASSERT_CUDA(cudaMalloc(&d_bytes, bytes.size()));
  ASSERT_CUDA(cudaMalloc(&d_raw, size_t(count) * 16));
  ASSERT_CUDA(cudaMalloc(&d_scaled, size_t(count) * 8 * 256 * 2));
  ASSERT_CUDA(cudaMemcpy(d_bytes, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  decode_groups_kernel<T><<<unsigned((count + 127) / 128), 128>>>(d_bytes, count, d_raw);
  ASSERT_CUDA(cudaGetLastError());
  scale_values_kernel<<<unsigned((count * 8 * 256 + 255) / 256), 256>>>(d_raw, count * 8, d_scaled);
  ASSERT_CUDA(cudaGetLastError());
  std::vector<uint32_t> raw(size_t(count) * 4);
  std::vector<uint16_t> scaled(size_t(count) * 8 * 256);
  ASSERT_CUDA(cudaMemcpy(raw.data(), d_raw, raw.size() * 4, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(scaled.data(), d_scaled, scaled.size() * 2, cudaMemcpyDeviceToHost));
  cudaFree(d_bytes);
  cudaFree(d_raw);
  cudaFree(d_scaled);

  const float raw_factor = std::ldexp(1.0f, Format::kRawExponent);
  int64_t bad = 0;
  for (int64_t n = 0; n < count; ++n) {
    for (int p = 0; p < 4; ++p) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t code = groups[size_t(n)][size_t(pair_element<T>(p, half))];
        const uint16_t bits = uint16_t(raw[size_t(n * 4 + p)] >> (16 * half));
        const float got = base::f16_to_float(bits) * raw_factor;
        const float want = mx::decode(T, code);
        if (!same_value(want, got) && bad++ < 5) {
          ADD_FAILURE() << "code 0x" << std::hex << int(code) << std::dec << " decodes to " << got
                        << ", expected " << want;
        }
        const int64_t value = n * 8 + p * 2 + half;
        for (int e = 0; e < 256; e += (n % 7 == 0 ? 1 : 37)) {
          const float exact = mx::decode(T, code) / raw_factor * mx::decode_scale(uint8_t(e));
          const uint16_t want_bits = base::float_to_bf16(exact);
          const uint16_t got_bits = scaled[size_t(value * 256 + e)];
          const bool ok =
              std::isnan(exact) ? std::isnan(base::bf16_to_float(got_bits)) : want_bits == got_bits;
          if (!ok && bad++ < 5) {
            ADD_FAILURE() << "code 0x" << std::hex << int(code) << " scale 0x" << e << std::dec
                          << " gives bf16 0x" << std::hex << got_bits << ", expected 0x"
                          << want_bits;
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaKvFormat, E4M3MatchesFormats) {
  check_format<DType::e4m3>();
}
TEST(CudaKvFormat, E5M2MatchesFormats) {
  check_format<DType::e5m2>();
}
TEST(CudaKvFormat, E2M3MatchesFormats) {
  check_format<DType::e2m3>();
}
TEST(CudaKvFormat, E3M2MatchesFormats) {
  check_format<DType::e3m2>();
}
TEST(CudaKvFormat, E2M1MatchesFormats) {
  check_format<DType::e2m1>();
}

TEST(CudaKvFormat, E8m0MatchesFormats) {
  float* d_out = nullptr;
  ASSERT_CUDA(cudaMalloc(&d_out, 256 * 4));
  e8m0_kernel<<<1, 256>>>(d_out);
  ASSERT_CUDA(cudaGetLastError());
  std::vector<float> out(256);
  ASSERT_CUDA(cudaMemcpy(out.data(), d_out, 256 * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_out);
  for (int e = 0; e < 256; ++e) {
    EXPECT_TRUE(same_value(mx::decode_scale(uint8_t(e)), out[size_t(e)])) << "scale byte " << e;
  }
}

// The kernel's fast scale path: every byte at every position of a word, among neighbours that are
// random bytes or the two ends themselves (so a 0x00 next to a 0xFF, and carries between bytes,
// are covered), then random words.
TEST(CudaKvFormat, E8m0WordsMatchFormats) {
  const uint64_t seed = 8080;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> words;
  const uint8_t fillers[] = {0x00, 0xff, 0x01, 0xfe, 0x7f, 0x80};
  for (int e = 0; e < 256; ++e)
    for (int index = 0; index < 4; ++index)
      for (int variant = 0; variant < 12; ++variant) {
        uint32_t w = 0;
        for (int k = 0; k < 4; ++k) {
          const uint8_t other =
              variant < 6 ? fillers[variant] : uint8_t(1 + rng() % 254);  // variant >= 6: normal
          w |= uint32_t(k == index ? uint8_t(e) : other) << (8 * k);
        }
        words.push_back(w);
      }
  for (int n = 0; n < 100000; ++n) words.push_back(uint32_t(rng()));
  const int64_t count = int64_t(words.size());
  uint32_t* d_words = nullptr;
  uint8_t* d_ends = nullptr;
  float* d_values = nullptr;
  ASSERT_CUDA(cudaMalloc(&d_words, size_t(count) * 4));
  ASSERT_CUDA(cudaMalloc(&d_ends, size_t(count)));
  ASSERT_CUDA(cudaMalloc(&d_values, size_t(count) * 16));
  ASSERT_CUDA(cudaMemcpy(d_words, words.data(), size_t(count) * 4, cudaMemcpyHostToDevice));
  e8m0_word_kernel<<<unsigned((count + 255) / 256), 256>>>(d_words, count, d_ends, d_values);
  ASSERT_CUDA(cudaGetLastError());
  std::vector<uint8_t> ends(static_cast<size_t>(count));
  std::vector<float> values(size_t(count) * 4);
  ASSERT_CUDA(cudaMemcpy(ends.data(), d_ends, size_t(count), cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(values.data(), d_values, size_t(count) * 16, cudaMemcpyDeviceToHost));
  cudaFree(d_words);
  cudaFree(d_ends);
  cudaFree(d_values);
  int64_t bad = 0;
  for (int64_t n = 0; n < count; ++n) {
    const uint32_t w = words[size_t(n)];
    bool any_end = false;
    for (int index = 0; index < 4; ++index) {
      const uint8_t e = uint8_t(w >> (8 * index));
      const bool end = e == 0x00 || e == 0xff;
      any_end = any_end || end;
      if (!end && !same_value(mx::decode_scale(e), values[size_t(n * 4 + index)]) && bad++ < 5) {
        ADD_FAILURE() << "byte " << index << " of word 0x" << std::hex << w << std::dec
                      << " reads as " << values[size_t(n * 4 + index)];
      }
    }
    if ((ends[size_t(n)] != 0) != any_end && bad++ < 5) {
      ADD_FAILURE() << "word 0x" << std::hex << w << std::dec << ": e8m0_end_bytes says "
                    << int(ends[size_t(n)]);
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace mxattn::cuda::detail
