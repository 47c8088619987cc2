// The narrow split kernel for MX caches: the same work as decode_split_kernel (one CTA, one split
// of one query tile, four warps streaming 16-key steps through cp.async pipelines) for CTAs of at
// most 8 packed rows, with the products transposed so that the keys, not the few query rows, fill
// the tensor cores' 16-row side:
//
//   S^T = K Q^T   A = 16 keys x 16 dims (raw codes), B = Q^T (16 dims x 8 rows), one accumulator
//                 of 4 registers per 32-dim block, scaled in f32 by the lane's two keys' scales;
//   O^T += V^T P^T A = 16 value dims x 16 keys, B = P^T (16 keys x 8 rows), P moved from the
//                 score layout to the B layout by two 8x8 register transposes (movmatrix).
//
// Half the accumulators and products of the wide kernel, where 15 of 16 rows are empty at a GQA
// group of 1. V's E8M0 scales are applied in f16 by one packed multiply per pair: with a per-warp
// exponent T, P' = P 2^T and V' = V 2^-T, so that P' V' = P V; each V' = code 2^(E - T) is exact
// in f16 while E - T stays in a per-format window (NarrowWindow), which a step checks with one
// compare per key. A step whose scales leave the window (or are 0 or 0xFF) takes the exact path:
// V' in f32, rounded to bf16, and P' in bf16, as the wide kernel computes every step.
//
// Its shape (DecodeShape<..., true>): two stages of copies per warp at FP8 D=128 (four at FP4)
// and 128 registers, four CTAs an SM (the wide MX kernel: three, 168 registers); Q only as the B
// fragments of its rows (build_q_narrow), so that the SM's unused shared memory serves as L1.
//
// The host picks this kernel for MX K/V with V scales along the head dim when tile rows times the
// group are at most 8.
#pragma once

#include "cuda/common/head_dims.h"
#include "cuda/decode/kernel.cuh"

namespace mxattn::cuda::detail {

// Packed f16 product (exact here: every product is representable).
__device__ __forceinline__ uint32_t mul_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Transposes the warp's 8x8 matrix of 16-bit values held in fragment layout (lane l: row l/4,
// columns 2(l%4), +1).
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// The window [lo, hi] of t = E - T (E the scale's exponent) in which code * 2^t is an exact f16
// (its largest code at most 65504, its smallest step at least 2^-24) and the factor applied to the
// raw value, 2^(t + kRawExponent), a normal f16; and the lowest T (min_t), which bounds how far P'
// = P 2^T reaches into f16's subnormals. E5M2's codes span f16's range, so its window is 9 binades
// and T must follow the scales down further (P' normal for P >= 2^-2 at T = -12).
template <DType KV>
struct NarrowWindow;
template <>
struct NarrowWindow<DType::e4m3> {
  static constexpr int lo = -14, hi = 7, min_t = -6;
};
template <>
struct NarrowWindow<DType::e5m2> {
  static constexpr int lo = -8, hi = 0, min_t = -12;
};
template <>
struct NarrowWindow<DType::e2m3> {
  static constexpr int lo = -21, hi = 1, min_t = -6;
};
template <>
struct NarrowWindow<DType::e3m2> {
  static constexpr int lo = -20, hi = 3, min_t = -6;
};
template <>
struct NarrowWindow<DType::e2m1> {
  static constexpr int lo = -23, hi = 1, min_t = -6;
};

// P' = P 2^T must stay below f16's largest value (P <= 2^8 under lazy rescaling): T <= 7.
inline constexpr int kNarrowMaxT = 7;

// A lane's scales of one step: K, keys g and g + 8, every block; V, the E8M0 byte of its value
// keys 2q, 2q + 1, 2q + 8, 2q + 9 in the block of its dims.
struct NarrowScales {
  uint32_t k[2][2];
  uint32_t v[4];
};

// The block of a lane's value dims, (DV / 8) g ... (DV / 8) g + DV / 8 - 1.
template <int DV>
__device__ __forceinline__ int narrow_value_block(int g) {
  return (DV / 8) * g / 32;
}

template <class Shape, int DQK, int DV>
__device__ __forceinline__ void read_stage_scales_narrow(const uint8_t* stage, int lane,
                                                         NarrowScales& s) {
  const int g = lane >> 2, q4 = lane & 3;
  const uint8_t* k_area = stage + Shape::kRowBytes;
  const uint8_t* v_area = k_area + Shape::kKScaleBytes;
#pragma unroll
  for (int t = 0; t < 2; ++t) load_scale_bytes<DQK / 32>(k_area + (g + 8 * t) * (DQK / 32), s.k[t]);
  const int block = narrow_value_block<DV>(g);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int key = 2 * q4 + (e & 1) + 8 * (e >> 1);
    s.v[e] = v_area[key * (DV / 32) + block];
  }
}

// The same from global memory (instances whose scale rows are not whole words). Keys outside
// [lo, hi] read K scales 1 and V scale 0 (their data is zero-filled).
template <int DQK, int DV>
__device__ __forceinline__ void load_step_scales_narrow(const DecodeParams& p, int64_t hkv,
                                                        StepPlace at, int64_t key0, int64_t lo,
                                                        int64_t hi, int lane, NarrowScales& s) {
  const int g = lane >> 2, q4 = lane & 3;
  const int key_rows[2] = {g, g + 8};
  load_slot_scales<DQK / 32>(p, p.k_scales, hkv, at, key0, lo, hi, key_rows, s.k);
  const int block = narrow_value_block<DV>(g);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int row = 2 * q4 + (e & 1) + 8 * (e >> 1);
    const int64_t key = key0 + row;
    s.v[e] = 0u;
    if (key >= lo && key <= hi)
      s.v[e] = slot_scale_row(p, p.v_scales, hkv, at.outer, at.slot0 + row, DV / 32)[block];
  }
}

// S^T for one step: lane holds keys g (s[0], s[1]) and g + 8 (s[2], s[3]) of rows 2q, 2q + 1.
// Each 32-dim block is its own product of raw codes, scaled in f32 by the two keys' scales.
// `q_narrow`: Q^T's B fragments as build_q_narrow lays them out, per block (two k16 steps) one
// 16-byte entry a lane {step 2b: b0, b1; step 2b + 1: b0, b1}, the rounding errors' entries (kLo)
// DQK / 32 blocks on.
template <DType KV, int DQK, int DV, bool kLo>
__device__ __forceinline__ void narrow_scores(const uint8_t* k_tile, const uint4* q_narrow,
                                              const NarrowScales& scales, bool scale_ends,
                                              float (&s)[4]) {
  using Shape = DecodeShape<KV, DQK, DV, true>;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < 4; ++e) s[e] = 0.0f;
#pragma unroll
  for (int blk = 0; blk < DQK / 32; ++blk) {
    uint32_t kr[2][4];
    load_key_block<KV, Shape>(k_tile, blk, kr);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint4 q = q_narrow[blk * 32 + lane];
    uint4 l{};
    if constexpr (kLo) l = q_narrow[(DQK / 32 + blk) * 32 + lane];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t a[4] = {kr[0][2 * h], kr[1][2 * h], kr[0][2 * h + 1], kr[1][2 * h + 1]};
      mma_16x8x16<MmaType::f16>(c, a, h ? q.z : q.x, h ? q.w : q.y);
      if constexpr (kLo) mma_16x8x16<MmaType::f16>(c, a, h ? l.z : l.x, h ? l.w : l.y);
    }
    float key_scale[2];
    block_scales(scales.k, blk, scale_ends, key_scale);
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] = fmaf(c[e], key_scale[e >> 1], s[e]);
  }
}

// Codes `c` and `c + 1` (c even) of the 8-code groups `a` and `b` (load_group's words) of two keys
// as f16 raw pairs: `lo` = (a's code c, b's code c), `hi` the same for code c + 1.
template <DType KV>
__device__ __forceinline__ void key_pair_codes(const uint32_t (&a)[2], const uint32_t (&b)[2],
                                               int c, uint32_t& lo, uint32_t& hi) {
  if constexpr (KV == DType::e5m2) {
    // E5M2 is the top byte of an f16: byte m of each key into bytes 1 and 3, the low bytes cleared.
    const auto pick = [&](uint32_t m) {
      return byte_perm(a[c / 4], b[c / 4], m | (m << 4) | ((4 + m) << 8) | ((4 + m) << 12)) &
             0xff00ff00u;
    };
    lo = pick(uint32_t(c % 4));
    hi = pick(uint32_t(c % 4) + 1);
  } else if constexpr (KV == DType::e4m3) {
    const uint32_t x = byte_perm(a[c / 4], b[c / 4], (c % 4) ? 0x7362u : 0x5140u);
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\n"
        "cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
  } else if constexpr (KV == DType::e2m1) {
    // Byte c / 2 of each key (codes c, c + 1 in its nibbles) at bytes 0 and 2.
    const uint32_t bb = uint32_t(c / 2);
    const uint32_t y = byte_perm(a[0], b[0], bb | (bb << 4) | ((4 + bb) << 8) | ((4 + bb) << 12));
    const auto place = [](uint32_t x) {
      return ((x << 9) & 0x0e000e00u) | ((x << 12) & 0x80008000u);
    };
    lo = place(y);
    hi = place(y >> 4);
  } else {
    static_assert(KV == DType::e2m3 || KV == DType::e3m2);
    constexpr int kShift = KV == DType::e2m3 ? 7 : 8;
    // Codes c, c + 1 are bits 6c ... 6c + 11 of the 48-bit group.
    const auto codes = [&](const uint32_t(&w)[2]) -> uint32_t {
      if (c == 0) return w[0];
      if (c == 2) return w[0] >> 12;
      if (c == 4) return __funnelshift_r(w[0], w[1], 24);
      return w[1] >> 4;
    };
    const uint32_t y = byte_perm(codes(a), codes(b), 0x5410u);
    lo = place_fp6_pair<kShift>(y);
    hi = place_fp6_pair<kShift>(y >> 6);
  }
}

// A lane's value codes of one step: the groups of 8 dims (DV / 8 dims from (DV / 8) g) of its keys
// 2q, 2q + 1, 2q + 8, 2q + 9.
template <DType KV, int DV>
struct NarrowValues {
  static constexpr int kGroups = DV / 64;
  uint32_t w[4][kGroups][2];
};

template <DType KV, int DQK, int DV>
__device__ __forceinline__ void load_narrow_values(const uint8_t* v_tile, int lane,
                                                   NarrowValues<KV, DV>& v) {
  using Shape = DecodeShape<KV, DQK, DV, true>;
  const int g = lane >> 2, q4 = lane & 3;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int key = 2 * q4 + (e & 1) + 8 * (e >> 1);
    constexpr int kGroups = NarrowValues<KV, DV>::kGroups;
    if constexpr ((Shape::kBits == 8 || Shape::kBits == 4) && kGroups % 2 == 0) {
      // Two groups a load (FP8: 16 bytes, so that a quarter warp's loads, rows 2q of lane groups
      // g and g + 1, fall in 8 distinct swizzled chunks; FP4: 8 bytes).
#pragma unroll
      for (int i = 0; i < kGroups; i += 2) {
        const int offset = ((DV / 8) * g + 8 * i) * Shape::kBits / 8;
        const uint8_t* at =
            v_tile + tile_byte<Shape::kBits, Shape::kVChunks, Shape::kVRowBytes, true>(key, offset);
        if constexpr (Shape::kBits == 8) {
          const uint4 x = *reinterpret_cast<const uint4*>(at);
          v.w[e][i][0] = x.x;
          v.w[e][i][1] = x.y;
          v.w[e][i + 1][0] = x.z;
          v.w[e][i + 1][1] = x.w;
        } else {
          const uint2 x = *reinterpret_cast<const uint2*>(at);
          v.w[e][i][0] = x.x;
          v.w[e][i][1] = 0u;
          v.w[e][i + 1][0] = x.y;
          v.w[e][i + 1][1] = 0u;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kGroups; ++i) {
        const int offset = ((DV / 8) * g + 8 * i) * Shape::kBits / 8;
        const int at =
            tile_byte<Shape::kBits, Shape::kVChunks, Shape::kVRowBytes, true>(key, offset);
        load_group<KV>(v_tile, at, v.w[e][i]);
      }
    }
  }
}

// O^T += V'^T P'^T for one step. Product j covers dims (DV / 8) g + 2j (rows g) and + 1 (rows
// g + 8) of every lane group g. kFast: V' = raw * f (f16 factors f01 for keys 2q, 2q + 1 and f89
// for 2q + 8, 2q + 9) in f16; otherwise V' = raw * factor[e] in f32, rounded to bf16.
template <DType KV, int DV, bool kFast>
__device__ __forceinline__ void narrow_values(const NarrowValues<KV, DV>& v, uint32_t b0,
                                              uint32_t b1, uint32_t f01, uint32_t f89,
                                              const float (&factor)[4], float (&o)[DV / 16][4]) {
#pragma unroll
  for (int j = 0; j < DV / 16; ++j) {
    const int i = j / 4, c = 2 * (j % 4);
    uint32_t lo01, hi01, lo89, hi89;
    key_pair_codes<KV>(v.w[0][i], v.w[1][i], c, lo01, hi01);
    key_pair_codes<KV>(v.w[2][i], v.w[3][i], c, lo89, hi89);
    if constexpr (kFast) {
      const uint32_t a[4] = {mul_f16x2(lo01, f01), mul_f16x2(hi01, f01), mul_f16x2(lo89, f89),
                             mul_f16x2(hi89, f89)};
      mma_16x8x16<MmaType::f16>(o[j], a, b0, b1);
    } else {
      const auto scaled = [&](uint32_t raw, int k0) {
        return pack_pair<MmaType::bf16>(unpack_half<MmaType::f16>(raw, 0) * factor[k0],
                                        unpack_half<MmaType::f16>(raw, 1) * factor[k0 + 1]);
      };
      const uint32_t a[4] = {scaled(lo01, 0), scaled(hi01, 0), scaled(lo89, 2), scaled(hi89, 2)};
      mma_16x8x16<MmaType::bf16>(o[j], a, b0, b1);
    }
  }
}

// Sets to -inf the scores of a step's keys that a row does not see (or that lie outside the
// split's loadable range): lane keys g, g + 8, rows 2q, 2q + 1.
__device__ __forceinline__ void mask_step_narrow(const SplitRange& range,
                                                 const core::Visibility& vis, int64_t key0,
                                                 const int64_t (&query_row)[2], float (&s)[4]) {
  const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t key = key0 + g + 8 * (e >> 1);
    const bool seen =
        key >= range.load_lo && key <= range.load_hi && vis.visible(query_row[e & 1], key);
    if (!seen) s[e] = -INFINITY;
  }
}

// Q^T's B fragments for the narrow kernel from Q's staged rows 0-7 (stage_q_rows), per 32-dim
// block one 16-byte entry a lane: row g, pairs 0-3 of its 8-element group (dims 32 blk + 8q ...)
// as q_pair_terms makes them; then, where the products read them (`with_lo`), the rounding
// errors' entries DQK / 32 blocks on. The blocks are shared out over the
// warps; ends with a barrier.
template <DType KV, int DQK>
__device__ __forceinline__ void build_q_narrow(const float* stage, const int* row_exponent,
                                               bool with_lo, uint4* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q4 = lane & 3;
  for (int blk = warp; blk < DQK / 32; blk += kWarps) {
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int pair = 0; pair < 4; ++pair)
      q_pair_terms<KV, DQK>(stage, row_exponent, g, 32 * blk + 8 * q4, pair, hi[pair], lo[pair]);
    out[blk * 32 + lane] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    if (with_lo) out[(DQK / 32 + blk) * 32 + lane] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
  __syncthreads();
}

template <DType KV, int DQK, int DV>
__global__ void __launch_bounds__(kWarps * 32, (DecodeShape<KV, DQK, DV, true>::kMinBlocksPerSm))
    decode_split_kernel_narrow(const __grid_constant__ DecodeParams p) {
  using Format = KvFormat<KV>;
  using Shape = DecodeShape<KV, DQK, DV, true>;
  using Window = NarrowWindow<KV>;
  static_assert(Format::kMx && !Shape::kChains);
  constexpr int kStages = Shape::kStages;
  extern __shared__ __align__(16) uint8_t smem[];
  const SplitSmem<Shape, DQK> sm(smem);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q4 = lane & 3;

  allow_dependent_launch();

  const WorkItem work = p.work[blockIdx.x];
  const core::Visibility vis{work.last, p.causal, work.offset, p.window};
  SplitRange range;
  if (!start_cta(p, work, sm, range)) return;
  // Stage-major ring: stage i of the four warps side by side, so that the last stage, free until
  // the first step refills it, holds Q's staged rows meanwhile.
  auto stage_at = [&](int index) { return sm.ring + (index * kWarps + warp) * Shape::kStepBytes; };
  StepCopier<Shape> copier(p, range, lane);
  const SplitSteps steps = range.steps_of(0);
  const int64_t my_steps = warp_steps(steps.count, warp);
  auto step_key = [&](int64_t it) { return steps.first_key + (warp + kWarps * it) * kStepKeys; };
  copier.prime(my_steps, step_key, stage_at);

  const bool q_has_lo = p.q_split_lo;
  float* q_rows = reinterpret_cast<float*>(stage_at(kStages - 1) - warp * Shape::kStepBytes);
  static_assert(kNarrowRows * DQK * 4 <= kWarps * Shape::kStepBytes, "Q's rows fit a stage");
  stage_q_rows<KV, DQK, kNarrowRows>(p, range, q_rows, sm.row_exponent);
  uint4* q_narrow = reinterpret_cast<uint4*>(sm.q_frags);
  build_q_narrow<KV, DQK>(q_rows, sm.row_exponent, q_has_lo, q_narrow);

  // Per-lane row state: rows 2q (0) and 2q + 1 (1) of this CTA.
  float score_scale[2];
  int64_t query_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = 2 * q4 + r;
    score_scale[r] = scalbnf(p.scale_log2, sm.row_exponent[row] + Format::kRawExponent);
    query_row[r] = row < range.block_rows ? range.query_row(row) : range.row_first;
  }

  WarpState<DV, true> st;
  st.clear();

  NarrowScales prefetched{};
  if constexpr (!Shape::kScalesInStage) {
    if (my_steps > 0) {
      const int64_t key0 = step_key(0);
      load_step_scales_narrow<DQK, DV>(p, range.hkv, copier.place_of(key0), key0, range.load_lo,
                                       range.load_hi, lane, prefetched);
    }
  }

  // The warp's exponent T (P' = P 2^T, V' = V 2^-T), chosen at its first step from that step's V
  // scales: their exponent range [lo_e, hi_e] centred in the window [T + lo, T + hi].
  int t_exp = 0;
  int slot = 0;
  for (int64_t it = 0; it < my_steps; ++it) {
    const int refill_slot = slot == 0 ? kStages - 1 : slot - 1;
    copy_async_wait<kStages - 2>();
    __syncwarp();
    if (it + kStages - 1 < my_steps) {
      copier.copy(step_key(it + kStages - 1), stage_at(refill_slot));
    } else {
      copy_async_commit();
    }
    NarrowScales scales{};
    if constexpr (Shape::kScalesInStage) {
      read_stage_scales_narrow<Shape, DQK, DV>(stage_at(slot), lane, scales);
    } else {
      scales = prefetched;
      if (it + 1 < my_steps) {
        const int64_t key0 = step_key(it + 1);
        load_step_scales_narrow<DQK, DV>(p, range.hkv, copier.place_of(key0), key0, range.load_lo,
                                         range.load_hi, lane, prefetched);
      }
    }
    if (it == 0) {
      int lo_e = 255, hi_e = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int b = int(scales.v[e]);
        if (b != 0 && b != 255) {
          lo_e = min(lo_e, b);
          hi_e = max(hi_e, b);
        }
      }
      lo_e = __reduce_min_sync(0xffffffffu, lo_e);
      hi_e = __reduce_max_sync(0xffffffffu, hi_e);
      if (lo_e <= hi_e) {
        // (hi_e - hi + lo_e - lo) / 2 in unbiased exponents, rounded down.
        const int mid = (hi_e + lo_e - 254 - Window::hi - Window::lo) >> 1;
        t_exp = min(max(mid, Window::min_t), kNarrowMaxT);
      }
    }

    const int64_t key0 = step_key(it);
    const uint8_t* stage = stage_at(slot);
    slot = slot + 1 == kStages ? 0 : slot + 1;

    uint32_t k_ends = 0;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int w = 0; w < (DQK / 32 + 3) / 4; ++w) k_ends |= e8m0_end_bytes(scales.k[t][w]);
    const bool scale_ends = __any_sync(0xffffffffu, k_ends != 0u);
    float s[4];
    if (q_has_lo) {
      narrow_scores<KV, DQK, DV, true>(stage, q_narrow, scales, scale_ends, s);
    } else {
      narrow_scores<KV, DQK, DV, false>(stage, q_narrow, scales, scale_ends, s);
    }

#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] *= score_scale[e & 1];
    const bool unmasked = key0 >= range.full_lo && key0 + kStepKeys - 1 <= range.full_hi;
    if (__any_sync(0xffffffffu, !unmasked)) mask_step_narrow(range, vis, key0, query_row, s);

    // Lazy rescaling: each lane tests its own scores; only when some row grows past its
    // reference by the threshold are the row maxima reduced over the lane groups.
    float step_max[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) step_max[r] = fmaxf(s[r], s[2 + r]);
    const bool grows = step_max[0] > st.row_max[0] + kRescaleThreshold ||
                       step_max[1] > st.row_max[1] + kRescaleThreshold;
    if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int o = 4; o < 32; o <<= 1)
          step_max[r] = fmaxf(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], o));
        const float new_max = fmaxf(st.row_max[r], step_max[r]);
        const float alpha = new_max == -INFINITY ? 1.0f : exp2f(st.row_max[r] - new_max);
        st.row_max[r] = new_max;
        st.row_sum[r] *= alpha;
#pragma unroll
        for (int j = 0; j < DV / 16; ++j) {
          st.o[j][r] *= alpha;
          st.o[j][2 + r] *= alpha;
        }
      }
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r)
      base[r] = (st.row_max[r] == -INFINITY ? 0.0f : st.row_max[r]) - float(t_exp);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[e] = exp2_approx(s[e] - base[e & 1]);
      st.row_sum[e & 1] += s[e];
    }

    // V's factors: 2^(E - T + kRawExponent) as f16 where E - T lies in the window.
    const uint32_t window_base = uint32_t(127 + t_exp + Window::lo);
    bool in_window = true;
    uint32_t bits[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const uint32_t u = scales.v[e] - window_base;
      in_window = in_window && u <= uint32_t(Window::hi - Window::lo);
      bits[e] = (u + uint32_t(Window::lo + Format::kRawExponent + 15)) << 10;
    }
    NarrowValues<KV, DV> values;
    load_narrow_values<KV, DQK, DV>(stage + kStepKeys * Shape::kKRowBytes, lane, values);
    const float no_factor[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (__all_sync(0xffffffffu, in_window)) {
      const uint32_t b0 = transpose_8x8(pack_pair<MmaType::f16>(s[0], s[1]));
      const uint32_t b1 = transpose_8x8(pack_pair<MmaType::f16>(s[2], s[3]));
      narrow_values<KV, DV, true>(values, b0, b1, bits[0] | (bits[1] << 16),
                                  bits[2] | (bits[3] << 16), no_factor, st.o);
    } else {
      const uint32_t b0 = transpose_8x8(pack_pair<MmaType::bf16>(s[0], s[1]));
      const uint32_t b1 = transpose_8x8(pack_pair<MmaType::bf16>(s[2], s[3]));
      const float shift = scalbnf(1.0f, Format::kRawExponent - t_exp);
      float factor[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) factor[e] = e8m0_value(scales.v[e]) * shift;
      narrow_values<KV, DV, false>(values, b0, b1, 0u, 0u, factor, st.o);
    }
    __syncwarp();
  }

  // Row sums reduced over the lane groups, P' 2^T taken out.
  const float unscale = scalbnf(1.0f, -t_exp);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int o = 4; o < 32; o <<= 1)
      st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], o);
    st.row_sum[r] *= unscale;
  }
  const int split = work.split;
  const bool write_final = split == 0 && work.count <= 1;
  const bool write_partial = work.count >= 2 || p.write_all_partials;
  copy_async_wait<0>();
  __syncthreads();
  float* merge = reinterpret_cast<float*>(sm.ring);
  finish_split<DV, DV, 0>(p, range, split, write_final, write_partial, st, sm.warp_max, sm.warp_sum,
                          sm.row_lse, merge + warp * kRowsPerBlock * DV,
                          [&](int w) { return merge + w * kRowsPerBlock * DV; });
  if (p.arrivals != nullptr && work.count >= 2) combine_if_last(p, work, range, sm.row_exponent);
}

template <DType KV, int DQK, int DV>
KernelRef decode_kernel_ref_narrow() {
  return {reinterpret_cast<const void*>(&decode_split_kernel_narrow<KV, DQK, DV>),
          DecodeShape<KV, DQK, DV, true>::kSmemBytes, false};
}

// The split kernel of one KV type for head dims <DQK, DV>: the narrow kernel where asked for (MX
// types only), else the general one.
template <DType KV, bool kNarrow>
struct DecodeInstance {
  template <int DQK, int DV>
  KernelRef operator()() const {
    if constexpr (kNarrow) {
      return decode_kernel_ref_narrow<KV, DQK, DV>();
    } else {
      return decode_kernel_ref<KV, DQK, DV>();
    }
  }
};

// The instances of one KV type, one per pair of the head-dim table (cuda/common/head_dims.h).
template <DType KV>
KernelRef decode_kernel_for_dims(int64_t dim_qk, int64_t dim_v, bool narrow) {
  if constexpr (is_mx(KV)) {
    if (narrow) return for_head_dims<KernelRef>(dim_qk, dim_v, DecodeInstance<KV, true>{});
  }
  return for_head_dims<KernelRef>(dim_qk, dim_v, DecodeInstance<KV, false>{});
}

}  // namespace mxattn::cuda::detail
