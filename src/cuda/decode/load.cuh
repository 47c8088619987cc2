// Loading side of the split kernel: where a 16-key step of one KV head lives (dense or paged), the
// asynchronous copy of its K and V rows into a warp's shared-memory stage, and the lane's E8M0
// scales for that step. Keys outside the split's loadable range are never read: their rows are
// zero-filled and their scales read as 1.
#pragma once

#include <cstdint>

#include "core/visibility.h"
#include "cuda/common/device_ops.cuh"
#include "cuda/common/kv_format.cuh"
#include "cuda/decode/params.h"
#include "cuda/decode/shape.h"

namespace mxattn::cuda::detail {

// Physical 16-byte chunk of logical chunk `chunk` in row `row` of a stage tile: an XOR swizzle
// that spreads the rows a fragment read touches over all banks (none for FP6, whose rows are not
// a power of two chunks long).
template <int kBits, int kChunks, bool kValues>
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
  if constexpr ((kChunks & (kChunks - 1)) != 0) {
    return chunk;
  } else {
    int x;
    if constexpr (kValues) {
      x = kBits == 4 ? (row >> 1) & 3 : row & 6;
    } else {
      x = kBits == 16 ? (row & 1) << 2 : (kBits == 8 ? (row & 3) << 1 : row & 7);
    }
    return chunk ^ (x & (kChunks - 1));
  }
}

// Byte address of byte `offset` of row `row` in a swizzled tile (reads never cross a chunk).
template <int kBits, int kChunks, int kRowBytes, bool kValues>
__device__ __forceinline__ int tile_byte(int row, int offset) {
  return row * kRowBytes + (swizzled_chunk<kBits, kChunks, kValues>(row, offset >> 4) << 4) +
         (offset & 15);
}

// The 16 keys [key0, key0 + 16) of one step: the batch entry or page holding them (a step never
// spans two pages, since page sizes are multiples of 16) and the slot of key0 in it.
struct StepPlace {
  int64_t outer = 0;
  int64_t slot0 = 0;
};

__device__ __forceinline__ StepPlace step_place(const DecodeParams& p, int64_t b, int64_t key0,
                                                int64_t valid_key) {
  if (p.page_size == 0) return {b, key0};
  const int64_t page = p.block_table[b * p.block_table_stride + valid_key / p.page_size];
  return {page, key0 % p.page_size};
}

// The scale row of one key slot in a cache's E8M0 scales laid out [outer][slot][KV head][`bytes`]
// (K's; V's along the head dim).
__device__ __forceinline__ const uint8_t* slot_scale_row(const DecodeParams& p,
                                                         const uint8_t* scales, int64_t hkv,
                                                         int64_t outer, int64_t slot, int bytes) {
  return scales + ((outer * p.kv_slots + slot) * p.heads_kv + hkv) * bytes;
}

// The global sources of a lane's copies for one step: with paired copies its K and V row (at the
// lane's half of the first 32-byte pair), and where the scales ride in the stage the scale row it
// copies (lanes 0-15 a key's K scales, lanes 16-31 a key's V scales along the head dim or 16 bytes
// of the step's key block along the keys).
struct StepSources {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  const uint8_t* scale = nullptr;
};

template <class Shape>
__device__ __forceinline__ StepSources step_sources(const DecodeParams& p, int64_t hkv,
                                                    StepPlace at, int lane) {
  StepSources s;
  if constexpr (Shape::kPairedCopies) {
    const int64_t slot = at.slot0 + (lane >> 1);
    const int half = 16 * (lane & 1);
    s.k = p.k + at.outer * p.k_stride[0] + slot * p.k_stride[1] + hkv * p.k_stride[2] + half;
    s.v = p.v + at.outer * p.v_stride[0] + slot * p.v_stride[1] + hkv * p.v_stride[2] + half;
  }
  if constexpr (Shape::kScalesInStage) {
    constexpr int kKBytes = Shape::kKScaleBytes / kStepKeys;
    constexpr int kVBytes = Shape::kVScaleBytes / kStepKeys;
    const int row = lane & 15;
    const int64_t slot = at.slot0 + row;
    if (lane < 16) {
      s.scale = slot_scale_row(p, p.k_scales, hkv, at.outer, slot, kKBytes);
    } else if (!p.v_scales_along_keys) {
      s.scale = slot_scale_row(p, p.v_scales, hkv, at.outer, slot, Shape::kDimV / 32);
    } else {
      const int64_t blocks = (p.kv_slots + 31) / 32;
      s.scale = p.v_scales +
                ((at.outer * p.heads_kv + hkv) * blocks + at.slot0 / 32) * (kVBytes * kStepKeys) +
                row * 16;
    }
  }
  return s;
}

// Dense caches: the byte distance from a lane's sources of one step to those of its warp's next
// step, kWarps * kStepKeys keys on, so that the main loop advances them with one add each. Written
// from the parameters rather than as the difference of two steps' sources: so the compiler can
// recompute them from constant memory instead of holding them in registers (the difference form
// raised the MXFP8 kernel's spills from 4 to 16 bytes, some in the main loop).
struct SourceStrides {
  int64_t k = 0, v = 0, scale = 0;
};

template <class Shape>
__device__ __forceinline__ SourceStrides source_strides(const DecodeParams& p, int lane) {
  constexpr int64_t kKeys = kWarps * kStepKeys;
  static_assert(kKeys % 32 == 0, "a warp's steps advance by whole key blocks");
  SourceStrides d;
  if constexpr (Shape::kPairedCopies) {
    d.k = kKeys * p.k_stride[1];
    d.v = kKeys * p.v_stride[1];
  }
  if constexpr (Shape::kScalesInStage) {
    constexpr int kKBytes = Shape::kKScaleBytes / kStepKeys;
    constexpr int kVBytes = Shape::kVScaleBytes / kStepKeys;
    if (lane < 16) {
      d.scale = kKeys * p.heads_kv * kKBytes;
    } else if (!p.v_scales_along_keys) {
      d.scale = kKeys * p.heads_kv * (Shape::kDimV / 32);
    } else {
      d.scale = kKeys / 32 * (kVBytes * kStepKeys);
    }
  }
  return d;
}

__device__ __forceinline__ void advance(StepSources& s, const SourceStrides& d) {
  s.k += d.k;
  s.v += d.v;
  s.scale += d.scale;
}

// Issues the copy of a lane's MX scale row of one step (Shape::kScalesInStage) from `src` into the
// scale area of `stage`. Keys outside [lo, hi] get zeros, which only ever meet masked scores or
// zero-filled values.
template <class Shape>
__device__ __forceinline__ void copy_step_scales(const DecodeParams& p, const uint8_t* src,
                                                 int64_t key0, int64_t lo, int64_t hi,
                                                 uint8_t* stage, int lane) {
  constexpr int kKBytes = Shape::kKScaleBytes / kStepKeys;
  constexpr int kVBytes = Shape::kVScaleBytes / kStepKeys;
  uint8_t* k_area = stage + Shape::kRowBytes;
  uint8_t* v_area = k_area + Shape::kKScaleBytes;
  const int row = lane & 15;
  const bool valid = key0 + row >= lo && key0 + row <= hi;
  if (lane < 16) {
    copy_async_small<kKBytes>(k_area + row * kKBytes, valid ? src : p.k_scales, valid);
  } else if (!p.v_scales_along_keys) {
    constexpr int kBytes = Shape::kDimV / 32;
    copy_async_small<kBytes>(v_area + row * kBytes, valid ? src : p.v_scales, valid);
  } else if (row * 16 < kVBytes * kStepKeys) {
    // Every step holds a loadable key, so its key block is a real one.
    copy_async_16(v_area + row * 16, src, true);
  }
}

// Physical byte offset, in a swizzled tile, of 16-byte chunk `chunk` of row `row`.
template <int kBits, int kChunks, int kRowBytes, bool kValues>
__device__ __forceinline__ int chunk_byte(int row, int chunk) {
  return row * kRowBytes + (swizzled_chunk<kBits, kChunks, kValues>(row, chunk) << 4);
}

// The 16 rows of one tile (K or V) of a step, whole rows per pass of the warp (whole_row_passes):
// lane l copies chunk l % kChunks of rows l / kChunks + pass * (32 / kChunks). Its source moves by
// a fixed stride per pass, its destination by a constant, so a copy costs a few instructions.
// kChecked: rows outside [row_lo, row_hi] are zero-filled (their source replaced by `safe`, which
// is always mapped); otherwise every row is loadable.
template <int kBits, int kChunks, int kRowBytes, bool kValues, bool kChecked>
__device__ __forceinline__ void copy_rows(uint8_t* tile, const uint8_t* rows, int64_t row_bytes,
                                          int row_lo, int row_hi, const uint8_t* safe, int lane) {
  constexpr int kRowsPerPass = 32 / kChunks;
  const int lane_row = lane / kChunks, chunk = lane % kChunks;
  const uint8_t* src = rows + lane_row * row_bytes + chunk * 16;
  const int64_t pass_bytes = kRowsPerPass * row_bytes;
#pragma unroll
  for (int pass = 0; pass < kStepKeys / kRowsPerPass; ++pass) {
    const int row = lane_row + pass * kRowsPerPass;
    uint8_t* dst = tile + chunk_byte<kBits, kChunks, kRowBytes, kValues>(row, chunk);
    if constexpr (kChecked) {
      const bool valid = row >= row_lo && row <= row_hi;
      copy_async_16(dst, valid ? src : safe, valid);
    } else {
      copy_async_16(dst, src, true);
    }
    src += pass_bytes;
  }
}

// Issues the copies of one step's K and V rows into `stage`; keys outside [lo, hi] are zero-filled
// (the source of a zero-filled copy is the first bytes of K, always mapped: Dv <= Dqk).
//
// Paired copies (Shape::kPairedCopies): lanes 2r and 2r + 1 copy K row r and V row r, chunk 2j +
// (lane & 1) at copy j, so that a lane pair reads 32 contiguous bytes and a lane's sources are one
// row pointer plus constants: a few instructions per copy, and the key range checked once per row.
// Otherwise consecutive lanes copy consecutive chunks of whole rows (copy_rows where a row fills
// whole passes of the warp).
template <class Shape>
__device__ __forceinline__ void copy_step(const DecodeParams& p, int64_t hkv, StepPlace at,
                                          const StepSources& src, int64_t key0, int64_t lo,
                                          int64_t hi, uint8_t* stage, int lane) {
  constexpr int kKRowBytes = Shape::kKRowBytes, kVRowBytes = Shape::kVRowBytes;
  uint8_t* v_stage = stage + kStepKeys * kKRowBytes;
  if constexpr (Shape::kPairedCopies) {
    static_assert(2 * kStepKeys == 32, "two lanes per key row");
    const int row = lane >> 1, half = lane & 1;
    const int64_t key = key0 + row;
    const bool valid = key >= lo && key <= hi;
    const uint8_t* k_src = valid ? src.k : p.k;
    const uint8_t* v_src = valid ? src.v : p.k;
#pragma unroll
    for (int j = 0; j < Shape::kKChunks / 2; ++j) {
      const int chunk = 2 * j + half;
      copy_async_16(
          stage + chunk_byte<Shape::kBits, Shape::kKChunks, kKRowBytes, false>(row, chunk),
          k_src + 32 * j, valid);
    }
#pragma unroll
    for (int j = 0; j < Shape::kVChunks / 2; ++j) {
      const int chunk = 2 * j + half;
      copy_async_16(
          v_stage + chunk_byte<Shape::kBits, Shape::kVChunks, kVRowBytes, true>(row, chunk),
          v_src + 32 * j, valid);
    }
  } else {
    // The step's first rows and its loadable rows [row_lo, row_hi], once per step.
    const int64_t k_row_bytes = p.k_stride[1], v_row_bytes = p.v_stride[1];
    const uint8_t* k_rows =
        p.k + at.outer * p.k_stride[0] + at.slot0 * k_row_bytes + hkv * p.k_stride[2];
    const uint8_t* v_rows =
        p.v + at.outer * p.v_stride[0] + at.slot0 * v_row_bytes + hkv * p.v_stride[2];
    const int row_lo = int(core::max64(lo - key0, -1));
    const int row_hi = int(core::min64(hi - key0, kStepKeys));
    if constexpr (whole_row_passes(Shape::kKChunks) && whole_row_passes(Shape::kVChunks)) {
      // Most steps lie wholly inside the range: one warp-uniform test, then copies unchecked.
      if (row_lo <= 0 && row_hi >= kStepKeys - 1) {
        copy_rows<Shape::kBits, Shape::kKChunks, kKRowBytes, false, false>(
            stage, k_rows, k_row_bytes, 0, 0, p.k, lane);
        copy_rows<Shape::kBits, Shape::kVChunks, kVRowBytes, true, false>(
            v_stage, v_rows, v_row_bytes, 0, 0, p.k, lane);
      } else {
        copy_rows<Shape::kBits, Shape::kKChunks, kKRowBytes, false, true>(
            stage, k_rows, k_row_bytes, row_lo, row_hi, p.k, lane);
        copy_rows<Shape::kBits, Shape::kVChunks, kVRowBytes, true, true>(
            v_stage, v_rows, v_row_bytes, row_lo, row_hi, p.k, lane);
      }
    } else {
      constexpr int kKCopies = kStepKeys * Shape::kKChunks;
      constexpr int kCopies = kKCopies + kStepKeys * Shape::kVChunks;
#pragma unroll
      for (int u = 0; u < (kCopies + 31) / 32; ++u) {
        const int c = lane + 32 * u;
        if (kCopies % 32 != 0 && c >= kCopies) break;
        const bool is_key = c < kKCopies;
        const int cv = c - kKCopies;
        const int row = is_key ? c / Shape::kKChunks : cv / Shape::kVChunks;
        const int chunk = is_key ? c % Shape::kKChunks : cv % Shape::kVChunks;
        const bool valid = row >= row_lo && row <= row_hi;
        const uint8_t* src = is_key ? k_rows + row * k_row_bytes + chunk * 16
                                    : v_rows + row * v_row_bytes + chunk * 16;
        uint8_t* dst =
            is_key
                ? stage + chunk_byte<Shape::kBits, Shape::kKChunks, kKRowBytes, false>(row, chunk)
                : v_stage + chunk_byte<Shape::kBits, Shape::kVChunks, kVRowBytes, true>(row, chunk);
        copy_async_16(dst, valid ? src : p.k, valid);
      }
    }
  }
  if constexpr (Shape::kScalesInStage)
    copy_step_scales<Shape>(p, src.scale, key0, lo, hi, stage, lane);
  copy_async_commit();
}

// `kBytes` consecutive scale bytes (2, 4, 6 or 8; aligned to 2 at least) as little-endian words.
template <int kBytes>
__device__ __forceinline__ void load_scale_bytes(const uint8_t* src, uint32_t (&w)[2]) {
  if constexpr (kBytes == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    w[0] = v.x;
    w[1] = v.y;
  } else if constexpr (kBytes == 4) {
    w[0] = *reinterpret_cast<const uint32_t*>(src);
    w[1] = 0x7f7f7f7fu;
  } else if constexpr (kBytes == 6) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
    w[0] = uint32_t(h[0]) | (uint32_t(h[1]) << 16);
    w[1] = uint32_t(h[2]) | 0x7f7f0000u;
  } else {
    w[0] = uint32_t(*reinterpret_cast<const uint16_t*>(src)) | 0x7f7f0000u;
    w[1] = 0x7f7f7f7fu;
  }
}

__device__ __forceinline__ uint32_t scale_byte(const uint32_t (&w)[2], int index) {
  return (w[index >> 2] >> (8 * (index & 3))) & 0xffu;
}

// Block `blk`'s E8M0 scales of N keys (their scale words, load_scale_bytes) as f32: two
// instructions a scale, or the exact conversion where the step holds a 0 or 0xFF scale (`ends`).
template <int N>
__device__ __forceinline__ void block_scales(const uint32_t (&words)[N][2], int blk, bool ends,
                                             float (&out)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = e8m0_inner_value(words[k][blk / 4], blk % 4);
  if (ends) {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = e8m0_value(scale_byte(words[k], blk));
  }
}

// The scale words of N keys of a step (rows[k] of the step) from a cache's scales laid out
// [outer][slot][KV head][kBytes]; keys outside [lo, hi] read as scales 1 (bytes 0x7f).
template <int kBytes, int N>
__device__ __forceinline__ void load_slot_scales(const DecodeParams& p, const uint8_t* scales,
                                                 int64_t hkv, StepPlace at, int64_t key0,
                                                 int64_t lo, int64_t hi, const int (&rows)[N],
                                                 uint32_t (&out)[N][2]) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t key = key0 + rows[k];
    if (key >= lo && key <= hi) {
      load_scale_bytes<kBytes>(slot_scale_row(p, scales, hkv, at.outer, at.slot0 + rows[k], kBytes),
                               out[k]);
    } else {
      out[k][0] = out[k][1] = 0x7f7f7f7fu;
    }
  }
}

// The E8M0 scales one lane needs for one step. K: the four keys of its score columns (8t + 2q + e),
// every block. V along the head dim: its four value keys (2q, 2q+1, 2q+8, 2q+9), every block; along
// the keys: the step's key block, the 8 dims of each of its 64-dim chunks.
template <int DQK, int DV>
struct StepScales {
  uint32_t k[4][2];
  uint32_t v[4][2];
};

// Whether any scale byte the lane holds for a step is 0 or 0xFF (unused bytes of a word are
// padding, 0x7f).
template <int DQK, int DV>
__device__ __forceinline__ bool has_step_scale_end(const StepScales<DQK, DV>& s, bool along_keys) {
  uint32_t found = 0;
  auto test = [&](uint32_t word) { found |= e8m0_end_bytes(word); };
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int w = 0; w < (DQK / 32 + 3) / 4; ++w) test(s.k[k][w]);
  if (!along_keys) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int w = 0; w < (DV / 32 + 3) / 4; ++w) test(s.v[k][w]);
  } else {
#pragma unroll
    for (int c = 0; c < DV / 64; ++c) {
      test(s.v[c][0]);
      test(s.v[c][1]);
    }
  }
  return found != 0u;
}

// The lane's scales of one step from the scale area of its stage (Shape::kScalesInStage).
template <class Shape, int DQK, int DV>
__device__ __forceinline__ void read_stage_scales(const uint8_t* stage, bool along_keys, int lane,
                                                  StepScales<DQK, DV>& s) {
  const int g = lane >> 2, q4 = lane & 3;
  const uint8_t* k_area = stage + Shape::kRowBytes;
  const uint8_t* v_area = k_area + Shape::kKScaleBytes;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int row = 8 * (e >> 1) + 2 * q4 + (e & 1);
    load_scale_bytes<DQK / 32>(k_area + row * (DQK / 32), s.k[e]);
  }
  if (!along_keys) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 2 * q4 + (e & 1) + 8 * (e >> 1);
      load_scale_bytes<DV / 32>(v_area + row * (DV / 32), s.v[e]);
    }
  } else {
#pragma unroll
    for (int c = 0; c < DV / 64; ++c) load_scale_bytes<8>(v_area + 64 * c + 8 * g, s.v[c]);
  }
}

template <int DQK, int DV>
__device__ __forceinline__ void load_step_scales(const DecodeParams& p, int64_t hkv, StepPlace at,
                                                 int64_t key0, int64_t lo, int64_t hi, int lane,
                                                 StepScales<DQK, DV>& s) {
  const int g = lane >> 2, q4 = lane & 3;
  // The lane's four keys, K's and V's alike: 2q, 2q + 1, 2q + 8, 2q + 9.
  const int rows[4] = {2 * q4, 2 * q4 + 1, 2 * q4 + 8, 2 * q4 + 9};
  load_slot_scales<DQK / 32>(p, p.k_scales, hkv, at, key0, lo, hi, rows, s.k);
  if (!p.v_scales_along_keys) {
    load_slot_scales<DV / 32>(p, p.v_scales, hkv, at, key0, lo, hi, rows, s.v);
  } else {
    // Every step holds a loadable key, so its key block is a real one.
    const int64_t blocks = (p.kv_slots + 31) / 32;
    const uint8_t* row =
        p.v_scales + ((at.outer * p.heads_kv + hkv) * blocks + at.slot0 / 32) * DV + 8 * g;
#pragma unroll
    for (int c = 0; c < DV / 64; ++c) load_scale_bytes<8>(row + 64 * c, s.v[c]);
  }
}

}  // namespace mxattn::cuda::detail
