// How each K/V storage type reaches the tensor cores: a lane decodes a group of 8 consecutive
// elements of one row at a time into 4 packed pairs of 16-bit values.
//
// MX codes become f16 "raw" values with a few integer instructions (FP8 through the hardware
// E4M3 conversion or a byte permute), exact because every MX code is an f16 times a fixed power
// of two: raw = code value * 2^-kRawExponent. The E8M0 block scale and that power of two are
// applied later in f32, never in a 16-bit type, so no scale can overflow or underflow a 16-bit
// operand.
//
// A pair need not hold neighbouring elements: the reduction over the head dim does not care about
// order, so each decoder picks the pairing that is cheapest to build, and `pair_element` says which
// elements of the group a pair holds. Q's fragments follow the same map.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/device_ops.cuh"
#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

template <DType T>
struct KvFormat {
  static constexpr int kBits = bits_of(T);
  static constexpr bool kMx = is_mx(T);
  // Product types: bf16 for bf16 keys, else f16 (MX codes are exact f16 raw values); V products in
  // bf16 except for f16 values, because scaled MX values need bf16's range.
  static constexpr MmaType kKeyMma = T == DType::bf16 ? MmaType::bf16 : MmaType::f16;
  static constexpr MmaType kValueMma = T == DType::f16 ? MmaType::f16 : MmaType::bf16;
  // raw = value * 2^-kRawExponent.
  static constexpr int kRawExponent = (T == DType::e2m3 || T == DType::e2m1) ? 14
                                      : T == DType::e3m2                     ? 12
                                                                             : 0;
};

// Element of the 8-element group held by half `half` (0 = low) of pair `pair`.
template <DType T>
__host__ __device__ constexpr int pair_element(int pair, int half) {
  if constexpr (bits_of(T) == 6) return (pair / 2) * 4 + (pair % 2) + 2 * half;
  if constexpr (bits_of(T) == 4) return pair + 4 * half;
  return 2 * pair + half;
}

// Places two 6-bit codes (in bits 0-5 and 16-21) as f16 raw values: sign to bit 15, the other five
// bits just below the f16 exponent's top so that the code's exponent field lands in f16's.
template <int kMagnitudeShift>
__device__ __forceinline__ uint32_t place_fp6_pair(uint32_t two_codes) {
  return ((two_codes & 0x001f001fu) << kMagnitudeShift) | ((two_codes & 0x00200020u) << 10);
}

// The 8 codes of a group (FP8: bytes of w[0], w[1]; FP6: 6 bytes, w[0] then the low half of w[1];
// FP4: nibbles of w[0]) as 4 f16 raw pairs, pair p holding elements pair_element<T>(p, 0 and 1).
template <DType T>
__device__ __forceinline__ void decode_group(const uint32_t (&w)[2], uint32_t (&raw)[4]) {
  if constexpr (T == DType::e4m3) {
    // Both halves of a word converted in place (the conversion reads either half of a register).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n"
          "cvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
          : "=r"(raw[2 * h]), "=r"(raw[2 * h + 1])
          : "r"(w[h]));
    }
  } else if constexpr (T == DType::e5m2) {
    // E5M2 is the top byte of an f16.
#pragma unroll
    for (int p = 0; p < 4; ++p) raw[p] = byte_perm(w[p / 2], 0u, p % 2 ? 0x3424u : 0x1404u);
  } else if constexpr (T == DType::e2m3 || T == DType::e3m2) {
    constexpr int kShift = T == DType::e2m3 ? 7 : 8;
    const uint32_t first = w[0] & 0xffffffu;                  // codes 0-3
    const uint32_t second = __funnelshift_r(w[0], w[1], 24);  // codes 4-7 in the low 24 bits
    raw[0] = place_fp6_pair<kShift>((first & 0x3fu) | ((first << 4) & 0x3f0000u));
    raw[1] = place_fp6_pair<kShift>(((first >> 6) & 0x3fu) | ((first >> 2) & 0x3f0000u));
    raw[2] = place_fp6_pair<kShift>((second & 0x3fu) | ((second << 4) & 0x3f0000u));
    raw[3] = place_fp6_pair<kShift>(((second >> 6) & 0x3fu) | ((second >> 2) & 0x3f0000u));
  } else if constexpr (T == DType::e2m1) {
    // Nibbles p and p + 4 sit 16 bits apart: one shift places both halves.
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const uint32_t x = w[0] >> (4 * p);
      raw[p] = ((x << 9) & 0x0e000e00u) | ((x << 12) & 0x80008000u);
    }
  }
}

// An E8M0 scale (e <= 0xff) as f32 (spec §5): 2^(e - 127), 0xFF is NaN; exact, subnormal 2^-127
// included. Branch-free: e << 23 is the value for 1 <= e <= 254, and the two ends, 0 and 0xFF,
// differ from it only by the f32 bit 22 (2^-127 is 0x00400000, the quiet NaN 0x7fc00000).
__device__ __forceinline__ float e8m0_value(uint32_t e) {
  const uint32_t end_bit = ((e + 1u) & 0xfeu) == 0u ? 0x00400000u : 0u;
  return __uint_as_float((e << 23) | end_bit);
}

// Byte `index` of an E8M0 scale word as f32 when that byte is neither 0 nor 0xFF: e << 23, two
// instructions instead of e8m0_value's four.
__device__ __forceinline__ float e8m0_inner_value(uint32_t word, int index) {
  return __uint_as_float(((word >> (8 * index)) << 23) & 0x7f800000u);
}

// Nonzero exactly when some byte of `word` is 0 or 0xFF, the two E8M0 codes e8m0_inner_value gets
// wrong. A byte is one of them exactly when its eight bits are equal, i.e. when it XOR itself
// shifted by one bit (within the byte) is zero; then the classic zero-byte test, whose result
// (bits 7 of the bytes) the tests of several words combine by OR.
__device__ __forceinline__ uint32_t e8m0_end_bytes(uint32_t word) {
  const uint32_t flat = (word ^ (word >> 1)) & 0x7f7f7f7fu;
  return (flat - 0x01010101u) & ~flat & 0x80808080u;
}

// Reads a group of 8 codes starting at byte `offset` of a shared-memory tile whose rows start at
// multiples of 16 bytes (FP6: 2-byte aligned groups, read as two aligned words and shifted; reading
// up to 2 bytes past the group stays inside the kernel's shared memory).
template <DType T>
__device__ __forceinline__ void load_group(const uint8_t* row, int offset, uint32_t (&w)[2]) {
  if constexpr (bits_of(T) == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(row + offset);
    w[0] = v.x;
    w[1] = v.y;
  } else if constexpr (bits_of(T) == 6) {
    const int aligned = offset & ~3;
    const uint32_t lo = *reinterpret_cast<const uint32_t*>(row + aligned);
    const uint32_t hi = *reinterpret_cast<const uint32_t*>(row + aligned + 4);
    const int shift = (offset & 3) * 8;
    w[0] = __funnelshift_r(lo, hi, shift);
    w[1] = hi >> shift;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(row + offset);
    w[1] = 0;
  }
}

}  // namespace mxattn::cuda::detail
