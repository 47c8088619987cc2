// The split kernel of flash decoding: one CTA computes one split (spec §3) of one query tile for
// the up to 16 packed rows (query head of the group, query row) of one KV head, so every head of a
// GQA group shares each K/V load.
//
// Four warps stream the split's keys in 16-key steps (warp w takes steps w, w + 4, ...) through
// their own cp.async pipelines; each step is two m16n8k16 products for Q K^T and one k16 product
// per 8 value dims for P V, with an online softmax in between. At the end the warps' states are
// merged in shared memory and the CTA writes the split's partial (O_s normalized by its own sum,
// L_s in natural log), or the final O and LSE when the query tile has a single non-empty split.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "base/float16.h"
#include "core/split_plan.h"
#include "core/visibility.h"
#include "cuda/combine/combine_rows.cuh"
#include "cuda/combine/output.cuh"
#include "cuda/common/device_ops.cuh"
#include "cuda/common/kv_format.cuh"
#include "cuda/decode/kernels.h"
#include "cuda/decode/load.cuh"
#include "cuda/decode/params.h"
#include "cuda/decode/shape.h"
#include "mx/formats.h"

namespace mxattn::cuda::detail {

// Lazy rescaling: a row's reference maximum moves only when a score exceeds it by more than 2^8,
// so exp2 never overflows and most steps skip rescaling the accumulators.
inline constexpr float kRescaleThreshold = 8.0f;

// Q element (b, i, h, d) as f32, whatever its storage (plain or MX with its block scale).
__device__ __forceinline__ float load_q(const DecodeParams& p, int64_t b, int64_t i, int64_t h,
                                        int64_t d) {
  const int64_t row = b * p.q_stride[0] + i * p.q_stride[1] + h * p.q_stride[2];
  switch (p.q_dtype) {
    case DType::f32:
      return static_cast<const float*>(p.q)[row + d * p.q_stride[3]];
    case DType::f16:
      return base::f16_to_float(static_cast<const uint16_t*>(p.q)[row + d * p.q_stride[3]]);
    case DType::bf16:
      return base::bf16_to_float(static_cast<const uint16_t*>(p.q)[row + d * p.q_stride[3]]);
    default: {
      const uint8_t* codes = static_cast<const uint8_t*>(p.q) + row * bits_of(p.q_dtype) / 8;
      const uint8_t e = p.q_scales[b * p.q_scale_stride[0] + i * p.q_scale_stride[1] +
                                   h * p.q_scale_stride[2] + (d / 32) * p.q_scale_stride[3]];
      return mx::decode(p.q_dtype, mx::load_code(p.q_dtype, codes, d)) * mx::decode_scale(e);
    }
  }
}

// The keys of one split the CTA computes: its first step's key (a multiple of 16) and its steps.
struct SplitSteps {
  int64_t first_key = 0;
  int64_t count = 0;
};

// The rows and keys of one CTA: the packed rows of its query tile and the keys of its splits
// [work.split, work.split + work.chain). Splits of a tile cover equal runs of key tiles (spec §3),
// so split j of the CTA starts key_begin + j * split_keys keys in. A step never straddles two
// splits (tile_n is a multiple of 16), so a key of a split's step is loadable (or seen by every
// row) exactly when it lies in the CTA's range: [load_lo, load_hi] and [full_lo, full_hi] hold for
// every split of the CTA.
struct SplitRange : CtaKeys {
  int64_t b = 0;
  int64_t hkv = 0;
  int64_t row_first = 0;     // first query row of the tile
  int64_t tile_rows = 0;     // query rows in the tile
  int64_t packed_first = 0;  // first packed row of this CTA
  int block_rows = 0;        // packed rows of this CTA (<= 16)

  // The steps of split j of the CTA (none for a split without loadable keys).
  __device__ SplitSteps steps_of(int j) const {
    const int64_t lo = core::max64(key_begin + j * split_keys, load_lo);
    const int64_t hi = core::min64(key_begin + (j + 1) * split_keys - 1, load_hi);
    if (hi < lo) return {};
    const int64_t first = lo / kStepKeys * kStepKeys;
    return {first, (hi - first) / kStepKeys + 1};
  }

  int64_t head_first = 0;  // hkv * group: the KV head's first query head
  // Shared [kRowsPerBlock] tables (fill_row_table) of each packed row's query row and head past
  // row_first and head_first, read wherever a row's Q, O or partials are addressed.
  const int* row_query = nullptr;
  const int* row_head = nullptr;

  __device__ int64_t query_row(int r) const { return row_first + row_query[r]; }
  __device__ int64_t query_head(int r) const { return head_first + row_head[r]; }
};

// Fills the row tables of `s` (threads 0-15; read after the next barrier): packed row r of the CTA
// is query row row_first + (packed_first + r) % tile_rows of head head_first + (packed_first + r) /
// tile_rows. Once per CTA and in 32 bits (packed rows number at most the tile's rows times the
// group, below 2^20 as the grid's y extent bounds them): a 64-bit division is a call, and each
// element of Q and O used to pay two. Rows past block_rows get entries that address nothing.
__device__ __forceinline__ void fill_row_table(const SplitRange& s, int* row_query, int* row_head) {
  if (threadIdx.x < kRowsPerBlock) {
    const uint32_t packed = uint32_t(s.packed_first) + threadIdx.x;
    row_query[threadIdx.x] = int(packed % uint32_t(s.tile_rows));
    row_head[threadIdx.x] = int(packed / uint32_t(s.tile_rows));
  }
}

__device__ __forceinline__ SplitRange split_range(const DecodeParams& p, const WorkItem& work) {
  SplitRange s;
  s.b = work.b;
  // In 32 bits (row_blocks and the grid's y extent are below 2^16): a 64-bit division is a call.
  const uint32_t row_block = blockIdx.y % uint32_t(p.row_blocks);
  s.hkv = blockIdx.y / uint32_t(p.row_blocks);
  s.row_first = int64_t(work.q_tile) * p.tile_m;
  s.tile_rows = core::min64(p.tile_m, p.seq_q - s.row_first);
  s.packed_first = int64_t(row_block) * kRowsPerBlock;
  // At least 0: a short last query tile packs fewer rows than the row blocks of the grid hold.
  s.block_rows =
      int(core::max64(0, core::min64(kRowsPerBlock, s.tile_rows * p.group - s.packed_first)));
  s.head_first = s.hkv * p.group;
  static_cast<CtaKeys&>(s) = work.keys;
  return s;
}

// Stages the CTA's first kRows packed Q rows as f32 in `stage` ([kRows][DQK]) and, where the key
// product is f16, each row's exponent (so that the row scaled by 2^-exponent fits f16's range; the
// factor returns in the score scale); 0 otherwise, and for rows kRows-15. Ends with a barrier.
template <DType KV, int DQK, int kRows>
__device__ __forceinline__ void stage_q_rows(const DecodeParams& p, const SplitRange& s,
                                             float* stage, int* row_exponent) {
  using Format = KvFormat<KV>;
  constexpr MmaType kMma = Format::kKeyMma;
  static_assert(kRows == 8 || kRows == kRowsPerBlock);
  [[maybe_unused]] const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the row tables (fill_row_table)
  if (p.q_rows_vectorized) {
    // 16-bit Q, rows contiguous and aligned: 8 elements a load, two loads a thread at Dqk 128.
    constexpr int kLoads = DQK / 8;
    for (int idx = threadIdx.x; idx < kRows * kLoads; idx += kWarps * 32) {
      const int r = idx / kLoads, d = 8 * (idx % kLoads);
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (r < s.block_rows) {
        const int64_t i = s.query_row(r), h = s.query_head(r);
        v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) +
                                            s.b * p.q_stride[0] + i * p.q_stride[1] +
                                            h * p.q_stride[2] + d);
      }
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
      float x[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const uint16_t bits = uint16_t(w[e / 2] >> (16 * (e % 2)));
        x[e] = p.q_dtype == DType::bf16 ? base::bf16_to_float(bits) : base::f16_to_float(bits);
      }
      float4* dst = reinterpret_cast<float4*>(stage + r * DQK + d);
      dst[0] = make_float4(x[0], x[1], x[2], x[3]);
      dst[1] = make_float4(x[4], x[5], x[6], x[7]);
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * DQK; idx += kWarps * 32) {
      const int r = idx / DQK, d = idx % DQK;
      float x = 0.0f;
      if (r < s.block_rows) x = load_q(p, s.b, s.query_row(r), s.query_head(r), d);
      stage[idx] = x;
    }
  }
  if (kMma != MmaType::f16 || threadIdx.x >= kRows) {
    if (threadIdx.x < kRowsPerBlock) row_exponent[threadIdx.x] = 0;
  }
  __syncthreads();
  // Row exponents for f16 products: 8 lanes per row, 4 rows per warp.
  if constexpr (kMma == MmaType::f16) {
    const int r = warp * 4 + (lane >> 3);
    if (r < kRows) {
      float amax = 0.0f;
      for (int d = lane & 7; d < DQK; d += 8) amax = fmaxf(amax, fabsf(stage[r * DQK + d]));
#pragma unroll
      for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      int e = 0;
      if (amax > 0.0f && amax <= FLT_MAX) e = ilogbf(amax) + 1;
      if ((lane & 7) == 0) row_exponent[r] = e;
    }
    __syncthreads();
  }
}

// One packed pair of Q's operand from the staged rows (stage_q_rows): elements `pair` (in K's pair
// order, pair_element) of the 8-element group at `base` of row r, scaled by 2^-exponent where the
// key product is f16, as the product type (`hi`) and the rounding error of that (`lo`).
template <DType KV, int DQK>
__device__ __forceinline__ void q_pair_terms(const float* stage, const int* row_exponent, int r,
                                             int base, int pair, uint32_t& hi, uint32_t& lo) {
  constexpr MmaType kMma = KvFormat<KV>::kKeyMma;
  float v[2], rest[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float x = stage[r * DQK + base + pair_element<KV>(pair, half)];
    v[half] = kMma == MmaType::f16 ? scalbnf(x, -row_exponent[r]) : x;
  }
  hi = pack_pair<kMma>(v[0], v[1]);
#pragma unroll
  for (int half = 0; half < 2; ++half) rest[half] = v[half] - unpack_half<kMma>(hi, half);
  lo = pack_pair<kMma>(rest[0], rest[1]);
}

// Builds the general kernel's Q operand once per CTA: the 16 rows staged (stage_q_rows), then
// split into a rounded part and, where the product type cannot hold Q exactly, the rounding error.
// Fragment layout: [hi/lo][k step][lane] x 4 registers, in the lane-group element order of K.
template <DType KV, int DQK>
__device__ __forceinline__ void build_q_fragments(const DecodeParams& p, const SplitRange& s,
                                                  float* stage, int* row_exponent,
                                                  uint32_t* frags) {
  constexpr int kKSteps = DQK / 16;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  stage_q_rows<KV, DQK, kRowsPerBlock>(p, s, stage, row_exponent);
  const int g = lane >> 2, q4 = lane & 3;
  for (int ks = warp; ks < kKSteps; ks += kWarps) {
    const int base = 32 * (ks / 2) + 8 * q4;
    const int pair0 = 2 * (ks % 2);
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      q_pair_terms<KV, DQK>(stage, row_exponent, g + 8 * (reg & 1), base, pair0 + (reg >> 1),
                            hi[reg], lo[reg]);
    }
    *reinterpret_cast<uint4*>(frags + (ks * 32 + lane) * 4) =
        make_uint4(hi[0], hi[1], hi[2], hi[3]);
    // The rounding errors only where the products read them (p.q_split_lo).
    if (p.q_split_lo) {
      *reinterpret_cast<uint4*>(frags + ((kKSteps + ks) * 32 + lane) * 4) =
          make_uint4(lo[0], lo[1], lo[2], lo[3]);
    }
  }
  __syncthreads();
}

// The lane's K group of block `blk` of a step, keys g and g + 8 (rows of the stage's K tile), dims
// 32 blk + 8q ... + 7: 4 packed pairs each, MX codes decoded to f16 raw values, 16-bit values as
// stored.
template <DType KV, class Shape>
__device__ __forceinline__ void load_key_block(const uint8_t* k_tile, int blk,
                                               uint32_t (&kr)[2][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
  const int offset = (32 * blk + 8 * q4) * Shape::kBits / 8;
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int at =
        tile_byte<Shape::kBits, Shape::kKChunks, Shape::kKRowBytes, false>(8 * t + g, offset);
    if constexpr (is_mx(KV)) {
      uint32_t w[2];
      load_group<KV>(k_tile, at, w);
      decode_group<KV>(w, kr[t]);
    } else {
      const uint4 v = *reinterpret_cast<const uint4*>(k_tile + at);
      kr[t][0] = v.x;
      kr[t][1] = v.y;
      kr[t][2] = v.z;
      kr[t][3] = v.w;
    }
  }
}

// S = Q K^T for one step: two 8-key tiles, lane holding rows g, g+8 and keys 8t + 2q, 8t + 2q + 1.
// MX keys: each 32-dim block is a separate product of raw codes, scaled in f32 by its keys' scales.
template <DType KV, int DQK, int DV>
__device__ __forceinline__ void score_step(const uint8_t* k_tile, const uint32_t* q_frags,
                                           bool q_has_lo, const StepScales<DQK, DV>& scales,
                                           bool scale_ends, float (&s)[2][4]) {
  using Format = KvFormat<KV>;
  using Shape = DecodeShape<KV, DQK, DV>;
  constexpr MmaType kMma = Format::kKeyMma;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[t][e] = 0.0f;
#pragma unroll
  for (int blk = 0; blk < DQK / 32; ++blk) {
    uint32_t kr[2][4];
    load_key_block<KV, Shape>(k_tile, blk, kr);
    float c[2][4] = {};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ks = 2 * blk + h;
      const uint4 a4 = *reinterpret_cast<const uint4*>(q_frags + (ks * 32 + lane) * 4);
      const uint32_t a[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        if constexpr (Format::kMx) {
          mma_16x8x16<kMma>(c[t], a, kr[t][2 * h], kr[t][2 * h + 1]);
        } else {
          mma_16x8x16<kMma>(s[t], a, kr[t][2 * h], kr[t][2 * h + 1]);
        }
      }
      if (q_has_lo) {
        const uint4 l4 =
            *reinterpret_cast<const uint4*>(q_frags + ((Shape::kKSteps + ks) * 32 + lane) * 4);
        const uint32_t al[4] = {l4.x, l4.y, l4.z, l4.w};
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          if constexpr (Format::kMx) {
            mma_16x8x16<kMma>(c[t], al, kr[t][2 * h], kr[t][2 * h + 1]);
          } else {
            mma_16x8x16<kMma>(s[t], al, kr[t][2 * h], kr[t][2 * h + 1]);
          }
        }
      }
    }
    if constexpr (Format::kMx) {
      float key_scale[4];
      block_scales(scales.k, blk, scale_ends, key_scale);
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[t][e] = fmaf(c[t][e], key_scale[2 * t + (e & 1)], s[t][e]);
    }
  }
}

// O += P V for one step. P (lane: rows g, g+8, keys 2q, 2q+1, 2q+8, 2q+9) is already packed as the
// A operand. Value dims are permuted so that a lane's B columns are contiguous in memory: n-tile
// 8c + i, column n holds dim 64c + 8n + i.
template <DType KV, int DQK, int DV>
__device__ __forceinline__ void value_step(const uint8_t* v_tile, const uint32_t (&pa)[4],
                                           bool along_keys, const StepScales<DQK, DV>& scales,
                                           bool scale_ends, float (&o)[DV / 8][4]) {
  using Format = KvFormat<KV>;
  using Shape = DecodeShape<KV, DQK, DV>;
  constexpr MmaType kMma = Format::kValueMma;
  const int lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
  const int keys[4] = {2 * q4, 2 * q4 + 1, 2 * q4 + 8, 2 * q4 + 9};
#pragma unroll
  for (int c = 0; c < DV / 64; ++c) {
    const int offset = (64 * c + 8 * g) * Shape::kBits / 8;
    if constexpr (!Format::kMx) {
      uint32_t rv[4][4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint4 v = *reinterpret_cast<const uint4*>(
            v_tile +
            tile_byte<Shape::kBits, Shape::kVChunks, Shape::kVRowBytes, true>(keys[k], offset));
        rv[k][0] = v.x;
        rv[k][1] = v.y;
        rv[k][2] = v.z;
        rv[k][3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t sel = (i & 1) ? 0x7632u : 0x5410u;
        const uint32_t b0 = byte_perm(rv[0][i / 2], rv[1][i / 2], sel);
        const uint32_t b1 = byte_perm(rv[2][i / 2], rv[3][i / 2], sel);
        mma_16x8x16<kMma>(o[8 * c + i], pa, b0, b1);
      }
    } else {
      uint32_t raw[4][4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int at =
            tile_byte<Shape::kBits, Shape::kVChunks, Shape::kVRowBytes, true>(keys[k], offset);
        uint32_t w[2];
        load_group<KV>(v_tile, at, w);
        decode_group<KV>(w, raw[k]);
      }
      // The scale axis is uniform over the warp: each axis gets its own straight-line code, and
      // each scale is converted once (one per key along the head dim, one per dim along the keys).
      float val[4][8];
      const auto scale_values = [&](const auto& scale_of) {
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
          for (int pr = 0; pr < 4; ++pr)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int el = pair_element<KV>(pr, half);
              val[k][el] = unpack_half<MmaType::f16>(raw[k][pr], half) * scale_of(k, el);
            }
      };
      if (along_keys) {
        float dim_scale[8];
#pragma unroll
        for (int el = 0; el < 8; ++el)
          dim_scale[el] = e8m0_inner_value(scales.v[c][el / 4], el % 4);
        if (scale_ends) {
#pragma unroll
          for (int el = 0; el < 8; ++el) dim_scale[el] = e8m0_value(scale_byte(scales.v[c], el));
        }
        scale_values([&](int, int el) { return dim_scale[el]; });
      } else {
        // The lane's 8 dims lie in block 2c + g/4 of each of its keys.
        const int block = 2 * c + g / 4;
        float key_scale[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          key_scale[k] = e8m0_inner_value(scales.v[k][block / 4], block % 4);
        if (scale_ends) {
#pragma unroll
          for (int k = 0; k < 4; ++k) key_scale[k] = e8m0_value(scale_byte(scales.v[k], block));
        }
        scale_values([&](int k, int) { return key_scale[k]; });
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        mma_16x8x16<kMma>(o[8 * c + i], pa, pack_pair<kMma>(val[0][i], val[1][i]),
                          pack_pair<kMma>(val[2][i], val[3][i]));
      }
    }
  }
}

// Sets to -inf the scores of a step's keys that a row does not see (or that lie outside the
// split's loadable range).
__device__ __forceinline__ void mask_step(const SplitRange& range, const core::Visibility& vis,
                                          int64_t key0, const int64_t (&query_row)[2],
                                          float (&s)[2][4]) {
  const int q4 = threadIdx.x & 3;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t key = key0 + 8 * t + 2 * q4 + (e & 1);
      const bool seen =
          key >= range.load_lo && key <= range.load_hi && vis.visible(query_row[e >> 1], key);
      if (!seen) s[t][e] = -INFINITY;
    }
}

// The fused combine, at the end of every CTA of a tile with two or more splits: the CTA's partial
// writes are made visible at GPU scope before it counts its splits in (a barrier, then one thread's
// fence and atomic, as a split-K semaphore does); the CTA whose splits complete the tile's count
// combines the rows of this (query tile, blockIdx.y) from every split's partials and leaves the
// counter at zero for the next run. `flag` is a word of shared memory the CTA no longer needs.
__device__ __forceinline__ void combine_if_last(const DecodeParams& p, const WorkItem& work,
                                                const SplitRange& range, int* flag) {
  const int64_t counter = (int64_t(work.b) * p.q_tiles + work.q_tile) * gridDim.y + blockIdx.y;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const int arrived = atomicAdd(p.arrivals + counter, work.chain);
    *flag = arrived + work.chain == work.count;
    // Reset for the next run, which sees it without a fence: the split kernel is launched without
    // early start, so it begins only once this grid has ended and its writes are visible.
    if (*flag) p.arrivals[counter] = 0;
  }
  __syncthreads();
  if (*flag == 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int row = warp; row < range.block_rows; row += kWarps) {
    combine_row(p, range.b, range.query_row(row), range.query_head(row), work.count, lane);
  }
}

// Position of (row, dim) in a warp's merge rows of kChunk f32 dims: the dim XOR-swizzled by the
// row, so that the lanes of an accumulator fragment (rows g, dims 16q + 8e + i) fall in 8 banks,
// as rows padded by 4 floats would, without the padding (a stage holds no more than the rows).
template <int kChunk>
__device__ __forceinline__ int merge_index(int row, int dim) {
  return row * kChunk + (dim ^ ((4 * row) & (kChunk - 1)));
}

// The warps' running state of one split: O unnormalized, each row's reference maximum (log2 units)
// and its sum of exponentials (reduced over the lane quad).
// The narrow kernel (decode_narrow.cuh) holds O transposed: value dims as the product's rows,
// query rows as its 8 columns, half the accumulators.
template <int DV, bool kNarrow = false>
struct WarpState {
  static constexpr int kTiles = kNarrow ? DV / 16 : DV / 8;
  float o[kTiles][4];
  float row_max[2];
  float row_sum[2];

  // The state of a split before its first step: nothing seen.
  __device__ void clear() {
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] = 0.0f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }
};

// The end of one split, called by every thread: merges the four warps' states and writes the
// split's partial (O_s normalized by its own sum, L_s in natural log), or the final O and LSE.
// `own` is this warp's merge area and `area(w)` warp w's: 16 rows of kChunk dims, through which the
// rows go DV / kChunk dims at a time. The warps are summed in the same order whatever the chunk,
// so a split's result does not depend on how many splits its CTA computes. warp_max and warp_sum
// ([kWarps][16]) take each warp's row maxima and sums, row_lse ([16]) the rows' LSE.
template <int DV, int kChunk, int kValueShiftExponent, bool kNarrow, class Area>
__device__ __forceinline__ void finish_split(const DecodeParams& p, const SplitRange& range,
                                             int split, bool write_final, bool write_partial,
                                             const WarpState<DV, kNarrow>& st, float* warp_max,
                                             float* warp_sum, float* row_lse, float* own,
                                             const Area& area) {
  constexpr float kValueShift = float(kValueShiftExponent);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q4 = lane & 3;
  // Rows 8-15 only where the CTA has them (warp-uniform): decode packs few rows, often one.
  const bool upper_rows = range.block_rows > 8;
  const auto write_rows = [&](int chunk) {
    if constexpr (kNarrow) {
      // Lane (g, q) holds dims (DV / 8) g + 2j (+1 for e >= 2) of rows 2q, 2q + 1.
#pragma unroll
      for (int j = 0; j < DV / 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 2 * q4 + (e & 1);
          const int dim = (DV / 8) * g + 2 * j + (e >> 1);
          if (dim / kChunk == chunk) own[merge_index<kChunk>(row, dim % kChunk)] = st.o[j][e];
        }
    } else {
#pragma unroll
      for (int c = 0; c < DV / 64; ++c)
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = g + 8 * (e >> 1);
            const int dim = 64 * c + 8 * (2 * q4 + (e & 1)) + i;
            if ((e < 2 || upper_rows) && dim / kChunk == chunk)
              own[merge_index<kChunk>(row, dim % kChunk)] = st.o[8 * c + i][e];
          }
    }
  };
  write_rows(0);
  if constexpr (kNarrow) {
    // Rows 2q and 2q + 1, their statistics already reduced over the lane's key groups.
    if (g == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        warp_max[warp * kRowsPerBlock + 2 * q4 + r] = st.row_max[r];
        warp_sum[warp * kRowsPerBlock + 2 * q4 + r] = st.row_sum[r];
      }
    }
  } else if (q4 == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      warp_max[warp * kRowsPerBlock + g + 8 * r] = st.row_max[r];
      warp_sum[warp * kRowsPerBlock + g + 8 * r] = st.row_sum[r];
    }
  }
  __syncthreads();
  if (threadIdx.x < kRowsPerBlock) {
    const int row = threadIdx.x;
    float m = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_max[w * kRowsPerBlock + row]);
    float factor[kWarps], sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float mw = warp_max[w * kRowsPerBlock + row];
      factor[w] = mw == -INFINITY ? 0.0f : exp2f(mw - m);
      sum += factor[w] * warp_sum[w * kRowsPerBlock + row];
    }
    // Each warp's weight in the row, factor_w / sum (0 for a row that saw nothing), replaces its
    // sum: only this thread reads or writes this row's entries.
    for (int w = 0; w < kWarps; ++w) {
      warp_sum[w * kRowsPerBlock + row] =
          sum == 0.0f ? 0.0f : scalbnf(factor[w] / sum, kValueShiftExponent);
    }
    row_lse[row] = sum == 0.0f ? -INFINITY : (m + log2f(sum) - kValueShift) * 0.69314718055994531f;
  }
  __syncthreads();

#pragma unroll 1
  for (int chunk = 0; chunk < DV / kChunk; ++chunk) {
    if (chunk > 0) {
      __syncthreads();  // every thread has read the previous chunk
      write_rows(chunk);
      __syncthreads();
    }
    for (int idx = threadIdx.x; idx < range.block_rows * kChunk; idx += kWarps * 32) {
      const int row = idx / kChunk, d = idx % kChunk, dim = chunk * kChunk + d;
      // A row that saw nothing is exactly 0, whatever its (masked) products met in V.
      float x = 0.0f;
      if (row_lse[row] != -INFINITY) {
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
          x += area(w)[merge_index<kChunk>(row, d)] * warp_sum[w * kRowsPerBlock + row];
      }
      const int64_t i = range.query_row(row), h = range.query_head(row);
      if (write_final) {
        store_output(
            p,
            range.b * p.o_stride[0] + i * p.o_stride[1] + h * p.o_stride[2] + dim * p.o_stride[3],
            x);
      }
      if (write_partial) {
        p.part_o[split * p.part_o_stride[0] + range.b * p.part_o_stride[1] +
                 i * p.part_o_stride[2] + h * p.part_o_stride[3] + dim * p.part_o_stride[4]] = x;
      }
    }
  }
  if (int(threadIdx.x) < range.block_rows) {
    const int row = threadIdx.x;
    const int64_t i = range.query_row(row), h = range.query_head(row);
    if (write_final && p.lse != nullptr) {
      p.lse[range.b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] = row_lse[row];
    }
    if (write_partial) {
      p.part_lse[split * p.part_lse_stride[0] + range.b * p.part_lse_stride[1] +
                 h * p.part_lse_stride[2] + i * p.part_lse_stride[3]] = row_lse[row];
    }
  }
}

// The split kernels' shared memory: the copy ring (which also holds the warps' merge rows at the
// end), Q's fragments and staging rows, and the per-row and per-warp tables, in that order.
template <class Shape, int DQK>
struct SplitSmem {
  uint8_t* ring;
  uint32_t* q_frags;
  float* q_stage;     // the general kernel's; the narrow kernel stages Q in the ring (no bytes)
  float* warp_max;    // [kWarps][16]
  float* warp_sum;    // [kWarps][16]
  int* row_exponent;  // [16]
  float* row_lse;     // [16]
  int* merge_stage;   // [kWarps]
  int* row_query;     // [16]
  int* row_head;      // [16]

  __device__ explicit SplitSmem(uint8_t* smem)
      : ring(smem),
        q_frags(reinterpret_cast<uint32_t*>(smem + Shape::kLoopBytes)),
        q_stage(reinterpret_cast<float*>(smem + Shape::kLoopBytes + Shape::kQFragBytes)),
        warp_max(q_stage + Shape::kQStageBytes / 4),
        warp_sum(warp_max + kWarps * kRowsPerBlock),
        row_exponent(reinterpret_cast<int*>(warp_sum + kWarps * kRowsPerBlock)),
        row_lse(reinterpret_cast<float*>(row_exponent + kRowsPerBlock)),
        merge_stage(reinterpret_cast<int*>(row_lse + kRowsPerBlock)),
        row_query(merge_stage + kWarps),
        row_head(row_query + kRowsPerBlock) {}
};

// The CTA's rows and keys from its work item, its row tables started (read after the next
// barrier); false for a row block past the packed rows of a short last query tile, which has
// nothing to do (uniform over the CTA).
template <class Shape, int DQK>
__device__ __forceinline__ bool start_cta(const DecodeParams& p, const WorkItem& work,
                                          const SplitSmem<Shape, DQK>& sm, SplitRange& range) {
  range = split_range(p, work);
  if (range.block_rows == 0) return false;
  range.row_query = sm.row_query;
  range.row_head = sm.row_head;
  fill_row_table(range, sm.row_query, sm.row_head);
  return true;
}

// A warp's steps among `steps` steps of a split: warp w takes steps w, w + kWarps, ...
__device__ __forceinline__ int64_t warp_steps(int64_t steps, int warp) {
  return steps > warp ? (steps - warp + kWarps - 1) / kWarps : 0;
}

// The copy side of one warp's pipeline: issues the copy of the warp's step at key0 into a stage,
// steps in order. The lane's sources are computed once (seek) and then advanced by a fixed stride
// per step for dense caches, computed for each step from its page for paged ones.
template <class Shape>
struct StepCopier {
  const DecodeParams& p;
  const SplitRange& range;
  int lane;
  bool dense;
  SourceStrides strides;
  StepSources next{};

  __device__ StepCopier(const DecodeParams& params, const SplitRange& r, int lane_index)
      : p(params),
        range(r),
        lane(lane_index),
        dense(params.page_size == 0),
        strides(source_strides<Shape>(params, lane_index)) {}

  __device__ StepPlace place_of(int64_t key0) const {
    return step_place(p, range.b, key0, core::max64(key0, range.load_lo));
  }
  // Points a dense cache's sources at the step of key0, the next one the warp copies.
  __device__ void seek(int64_t key0) {
    if (dense) next = step_sources<Shape>(p, range.hkv, place_of(key0), lane);
  }
  __device__ void copy(int64_t key0, uint8_t* stage) {
    const StepPlace at = place_of(key0);
    StepSources src;
    if (dense) {
      src = next;
      advance(next, strides);
    } else {
      src = step_sources<Shape>(p, range.hkv, at, lane);
    }
    copy_step<Shape>(p, range.hkv, at, src, key0, range.load_lo, range.load_hi, stage, lane);
  }
  // The first kStages - 1 of the warp's `steps` steps (key_of(n): the n-th one's first key) into
  // stages 0, 1, ..., an empty group for each one past `steps` (the main loop's wait counts one
  // group per step).
  template <class KeyOf, class StageOf>
  __device__ void prime(int64_t steps, const KeyOf& key_of, const StageOf& stage_at) {
    if (steps > 0) seek(key_of(0));
#pragma unroll
    for (int it = 0; it < Shape::kStages - 1; ++it) {
      if (it < steps) {
        copy(key_of(it), stage_at(it));
      } else {
        copy_async_commit();
      }
    }
  }
};

template <DType KV, int DQK, int DV>
__global__ void __launch_bounds__(kWarps * 32, (DecodeShape<KV, DQK, DV>::kMinBlocksPerSm))
    decode_split_kernel(const __grid_constant__ DecodeParams p) {
  using Format = KvFormat<KV>;
  using Shape = DecodeShape<KV, DQK, DV>;
  constexpr int kStages = Shape::kStages;
  extern __shared__ __align__(16) uint8_t smem[];
  const SplitSmem<Shape, DQK> sm(smem);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2;

  // The combine kernel that follows (if any) may be scheduled now: it waits for this grid's end
  // before it reads anything, and starting it early hides its launch behind this grid's last wave.
  allow_dependent_launch();

  // One load: the work item carries its tile's partition and its sequence's visibility. The CTA's
  // splits share their rows (and so Q) and differ only in their keys.
  const WorkItem work = p.work[blockIdx.x];
  const core::Visibility vis{work.last, p.causal, work.offset, p.window};
  SplitRange range;
  if (!start_cta(p, work, sm, range)) return;
  const int chain = Shape::kChains ? work.chain : 1;
  // Stage `index` of this warp's ring; the warp's n-th step (counted over the CTA's splits)
  // lives in stage n % kStages.
  auto stage_at = [&](int index) { return sm.ring + (warp * kStages + index) * Shape::kStepBytes; };

  // The copy side of the warp's pipeline walks its steps of the CTA's splits in order, so that the
  // copies of a split's first steps fly while the previous split ends: copy_split is the split of
  // the next copy (chain once every copy is issued), copy_key its first key, copy_left the warp's
  // steps left in that split.
  StepCopier<Shape> copier(p, range, lane);
  int copy_split = -1;
  int64_t copy_key = 0, copy_left = 0;
  const auto next_copy_split = [&] {
    while (copy_left == 0 && ++copy_split < chain) {
      const SplitSteps ss = range.steps_of(copy_split);
      copy_key = ss.first_key + warp * kStepKeys;
      copy_left = warp_steps(ss.count, warp);
    }
    if (copy_left > 0) copier.seek(copy_key);
  };
  // Issues the warp's next copy into `stage`, or an empty group once all are issued (the main
  // loop's wait counts one group per step).
  const auto copy_next = [&](uint8_t* stage) {
    if (copy_left == 0) {
      copy_async_commit();
      return;
    }
    copier.copy(copy_key, stage);
    copy_key += kWarps * kStepKeys;
    if (--copy_left == 0) next_copy_split();
  };
  // Kernels of one split a CTA copy step by step index instead, without the chain's cursor (its
  // registers made ptxas spill in the MX kernels, at three CTAs an SM).
  const SplitSteps first_steps = range.steps_of(0);
  const auto first_key_of = [&](int64_t it) {
    return first_steps.first_key + (warp + kWarps * it) * kStepKeys;
  };
  // Start this warp's copies first, so that they fly while Q is prepared.
  if constexpr (Shape::kChains) {
    next_copy_split();
#pragma unroll
    for (int it = 0; it < kStages - 1; ++it) copy_next(stage_at(it));
  } else {
    copier.prime(warp_steps(first_steps.count, warp), first_key_of, stage_at);
  }

  build_q_fragments<KV, DQK>(p, range, sm.q_stage, sm.row_exponent, sm.q_frags);
  const bool q_has_lo = p.q_split_lo;

  // Per-lane row state: rows g (0) and g + 8 (1) of this CTA.
  float score_scale[2];
  int64_t query_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    // Q rows were scaled by 2^-exponent, and raw MX key codes are the values times
    // 2^-kRawExponent: both factors return here.
    score_scale[r] =
        scalbnf(p.scale_log2, sm.row_exponent[row] + (Format::kMx ? Format::kRawExponent : 0));
    query_row[r] = row < range.block_rows ? range.query_row(row) : range.row_first;
  }
  // Raw V values carry 2^-kRawExponent too, so P carries 2^kRawExponent: the products are the
  // true ones, while the row sums carry the factor, which the merge takes out again.
  constexpr int kValueShiftExponent = Format::kMx ? Format::kRawExponent : 0;
  constexpr float kValueShift = float(kValueShiftExponent);

  // The stage of the warp's next step, counted without a 64-bit remainder.
  int slot = 0;
#pragma unroll 1
  for (int j = 0; j < chain; ++j) {
    const SplitSteps steps = range.steps_of(j);
    const int64_t my_steps = warp_steps(steps.count, warp);
    auto step_key = [&](int64_t it) { return steps.first_key + (warp + kWarps * it) * kStepKeys; };

    WarpState<DV> st;
    st.clear();

    // MX scales travel in the stage with the data where their rows are whole 4-byte words (Dqk
    // and Dv multiples of 128); otherwise through registers, loaded one step ahead (such kernels
    // compute one split a CTA).
    StepScales<DQK, DV> prefetched{};
    if constexpr (Format::kMx && !Shape::kScalesInStage) {
      if (my_steps > 0) {
        const int64_t key0 = step_key(0);
        load_step_scales<DQK, DV>(p, range.hkv, copier.place_of(key0), key0, range.load_lo,
                                  range.load_hi, lane, prefetched);
      }
    }

    for (int64_t it = 0; it < my_steps; ++it) {
      // The stage of the previous step is refilled with the step kStages - 1 ahead.
      const int refill_slot = slot == 0 ? kStages - 1 : slot - 1;
      copy_async_wait<kStages - 2>();
      __syncwarp();
      if constexpr (Shape::kChains) {
        copy_next(stage_at(refill_slot));
      } else if (it + kStages - 1 < my_steps) {
        copier.copy(step_key(it + kStages - 1), stage_at(refill_slot));
      } else {
        copy_async_commit();
      }
      StepScales<DQK, DV> scales{};
      if constexpr (Format::kMx) {
        if constexpr (Shape::kScalesInStage) {
          read_stage_scales<Shape>(stage_at(slot), p.v_scales_along_keys, lane, scales);
        } else {
          scales = prefetched;
          if (it + 1 < my_steps) {
            const int64_t key0 = step_key(it + 1);
            load_step_scales<DQK, DV>(p, range.hkv, copier.place_of(key0), key0, range.load_lo,
                                      range.load_hi, lane, prefetched);
          }
        }
      }

      const int64_t key0 = step_key(it);
      const uint8_t* stage = stage_at(slot);
      slot = slot + 1 == kStages ? 0 : slot + 1;
      // Scales 0 and 0xFF are rare (2^-127 and NaN): one warp-wide test per step picks the exact
      // conversion for every scale of the step.
      bool scale_ends = false;
      if constexpr (Format::kMx)
        scale_ends = __any_sync(0xffffffffu, has_step_scale_end(scales, p.v_scales_along_keys));
      float s[2][4];
      score_step<KV, DQK, DV>(stage, sm.q_frags, q_has_lo, scales, scale_ends, s);

      // Scores in log2 units, masked outside what each row sees. Only the steps at the edges of
      // the visible range have masked keys; the test is behind a vote so that it is a real branch
      // (as a plain condition the compiler predicated it, about 45 instructions in every step).
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[t][e] *= score_scale[e >> 1];
      const bool unmasked = key0 >= range.full_lo && key0 + kStepKeys - 1 <= range.full_hi;
      if (__any_sync(0xffffffffu, !unmasked)) mask_step(range, vis, key0, query_row, s);

      float step_max[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        step_max[r] =
            fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
        step_max[r] = fmaxf(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], 1));
        step_max[r] = fmaxf(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], 2));
      }
      const bool grows = step_max[0] > st.row_max[0] + kRescaleThreshold ||
                         step_max[1] > st.row_max[1] + kRescaleThreshold;
      if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float new_max = fmaxf(st.row_max[r], step_max[r]);
          const float alpha = new_max == -INFINITY ? 1.0f : exp2f(st.row_max[r] - new_max);
          st.row_max[r] = new_max;
          st.row_sum[r] *= alpha;
#pragma unroll
          for (int t = 0; t < DV / 8; ++t) {
            st.o[t][2 * r] *= alpha;
            st.o[t][2 * r + 1] *= alpha;
          }
        }
      }
      float base[2];
#pragma unroll
      for (int r = 0; r < 2; ++r)
        base[r] = (st.row_max[r] == -INFINITY ? 0.0f : st.row_max[r]) - kValueShift;
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[t][e] = exp2_approx(s[t][e] - base[e >> 1]);
          st.row_sum[e >> 1] += s[t][e];
        }
      constexpr MmaType kValueMma = Format::kValueMma;
      const uint32_t pa[4] = {
          pack_pair<kValueMma>(s[0][0], s[0][1]), pack_pair<kValueMma>(s[0][2], s[0][3]),
          pack_pair<kValueMma>(s[1][0], s[1][1]), pack_pair<kValueMma>(s[1][2], s[1][3])};
      value_step<KV, DQK, DV>(stage + kStepKeys * Shape::kKRowBytes, pa, p.v_scales_along_keys,
                              scales, scale_ends, st.o);
      __syncwarp();
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], 1);
      st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], 2);
    }
    const int split = work.split + j;
    const bool write_final = split == 0 && work.count <= 1;
    const bool write_partial = work.count >= 2 || p.write_all_partials;
    if (j + 1 == chain) {
      // The CTA's last split: no copy is left in flight, and the whole ring holds the four
      // warps' rows once every warp is done reading its stages.
      copy_async_wait<0>();
      __syncthreads();
      float* merge = reinterpret_cast<float*>(sm.ring);
      finish_split<DV, DV, kValueShiftExponent>(
          p, range, split, write_final, write_partial, st, sm.warp_max, sm.warp_sum, sm.row_lse,
          merge + warp * kRowsPerBlock * DV, [&](int w) { return merge + w * kRowsPerBlock * DV; });
    } else if constexpr (Shape::kChains) {
      // The next split's copies are in flight; the stage this warp consumed last stays free until
      // its refill, after the barrier below.
      const int free_slot = slot == 0 ? kStages - 1 : slot - 1;
      if (lane == 0) sm.merge_stage[warp] = free_slot;
      finish_split<DV, Shape::kMergeChunk, kValueShiftExponent>(
          p, range, split, write_final, write_partial, st, sm.warp_max, sm.warp_sum, sm.row_lse,
          reinterpret_cast<float*>(stage_at(free_slot)), [&](int w) {
            return reinterpret_cast<const float*>(sm.ring + (w * kStages + sm.merge_stage[w]) *
                                                                Shape::kStepBytes);
          });
      __syncthreads();  // every thread has read the merge stages and the row statistics
    }
  }
  if (p.arrivals != nullptr && work.count >= 2) combine_if_last(p, work, range, sm.row_exponent);
}

template <DType KV, int DQK, int DV>
KernelRef decode_kernel_ref() {
  return {reinterpret_cast<const void*>(&decode_split_kernel<KV, DQK, DV>),
          DecodeShape<KV, DQK, DV>::kSmemBytes, DecodeShape<KV, DQK, DV>::kChains};
}

}  // namespace mxattn::cuda::detail
