// spec §3's combine of one output row (b, i, h) from its split partials, by one warp, through the
// merge algebra of core/combine.h: it reads L_s and O_s of the splits below the row's exact count
// only. Used by the combine kernel (one warp per row) and by the split kernel's last CTA of a tile
// (the fused combine). Partials are read through L2 only (ld.global.cg): another CTA of the same
// grid wrote them, and a line an earlier reader left in this SM's L1 may be stale.
#pragma once

#include <cfloat>
#include <cstdint>

#include "core/combine.h"
#include "cuda/combine/combine.h"
#include "cuda/combine/output.cuh"

namespace mxattn::cuda::detail {

// Unrolled over splits so that several partial rows are in flight per lane.
inline constexpr int kSplitUnroll = 8;

__device__ __forceinline__ void combine_row(const CombineParams& p, int64_t b, int64_t i, int64_t h,
                                            int count, int lane) {
  const float* lse =
      p.part_lse + b * p.part_lse_stride[1] + h * p.part_lse_stride[2] + i * p.part_lse_stride[3];
  // m and the weight sum with the splits spread over the lanes, so that one load latency covers
  // them all. Up to 64 splits each lane keeps its two L_s (s = lane, lane + 32) and then their
  // weights, which the loop over O takes from the lane holding them instead of loading L_s again.
  const bool held = count <= 64;
  float held_lse[2] = {-INFINITY, -INFINITY};
  float held_w[2] = {0.0f, 0.0f};
  core::MergeScale st;
  if (held) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (lane + 32 * k < count) held_lse[k] = __ldcg(lse + (lane + 32 * k) * p.part_lse_stride[0]);
      st.m = core::merge_max(st.m, held_lse[k]);
    }
  } else {
    for (int s = lane; s < count; s += 32)
      st.m = core::merge_max(st.m, __ldcg(lse + s * p.part_lse_stride[0]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    st.m = core::merge_max(st.m, __shfl_xor_sync(0xffffffffu, st.m, o));
  if (held) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (lane + 32 * k < count) {
        held_w[k] = core::merge_weight(held_lse[k], st.m);
        st.sum += held_w[k];
      }
    }
  } else {
    for (int s = lane; s < count; s += 32)
      st.sum += core::merge_weight(__ldcg(lse + s * p.part_lse_stride[0]), st.m);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) st.sum += __shfl_xor_sync(0xffffffffu, st.sum, o);
  const float divisor = core::merge_divisor(st.sum);
  // w_s, the same value either way; s is the same on every lane.
  const auto weight_of = [&](int s) {
    if (held) return __shfl_sync(0xffffffffu, s < 32 ? held_w[0] : held_w[1], s & 31);
    return core::merge_weight(__ldcg(lse + s * p.part_lse_stride[0]), st.m);
  };

  const float* part =
      p.part_o + b * p.part_o_stride[1] + i * p.part_o_stride[2] + h * p.part_o_stride[3];
  const int64_t out = b * p.o_stride[0] + i * p.o_stride[1] + h * p.o_stride[2];
  const bool vectors = p.part_o_stride[4] == 1 && p.part_o_stride[0] % 4 == 0 &&
                       (reinterpret_cast<uintptr_t>(part) & 15) == 0;
  // Every lane runs every iteration (weight_of's shuffle needs the whole warp); lanes past Dv
  // load and store nothing.
  if (vectors) {
    for (int64_t d0 = 0; d0 < p.dim_v; d0 += 128) {
      const int64_t d = d0 + 4 * lane;
      const bool active = d < p.dim_v;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      // kSplitUnroll splits' loads in flight at a time, the last group's past `count` skipped.
      for (int s = 0; s < count; s += kSplitUnroll) {
        float4 v[kSplitUnroll];
        float w[kSplitUnroll];
#pragma unroll
        for (int u = 0; u < kSplitUnroll; ++u) {
          if (s + u < count) {
            w[u] = weight_of(s + u);
            v[u] = active ? __ldcg(reinterpret_cast<const float4*>(
                                part + (s + u) * p.part_o_stride[0] + d))
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
        }
#pragma unroll
        for (int u = 0; u < kSplitUnroll; ++u) {
          if (s + u < count) {
            acc.x = fmaf(w[u], v[u].x, acc.x);
            acc.y = fmaf(w[u], v[u].y, acc.y);
            acc.z = fmaf(w[u], v[u].z, acc.z);
            acc.w = fmaf(w[u], v[u].w, acc.w);
          }
        }
      }
      if (active) {
        store_output(p, out + d * p.o_stride[3], acc.x / divisor);
        store_output(p, out + (d + 1) * p.o_stride[3], acc.y / divisor);
        store_output(p, out + (d + 2) * p.o_stride[3], acc.z / divisor);
        store_output(p, out + (d + 3) * p.o_stride[3], acc.w / divisor);
      }
    }
  } else {
    for (int64_t d0 = 0; d0 < p.dim_v; d0 += 32) {
      const int64_t d = d0 + lane;
      const bool active = d < p.dim_v;
      float acc = 0.0f;
      for (int s = 0; s < count; ++s) {
        const float w = weight_of(s);
        if (active)
          acc = fmaf(w, __ldcg(part + s * p.part_o_stride[0] + d * p.part_o_stride[4]), acc);
      }
      if (active) store_output(p, out + d * p.o_stride[3], acc / divisor);
    }
  }
  if (lane == 0 && p.lse != nullptr) {
    p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] =
        core::merge_lse(st.m, st.sum);
  }
}

}  // namespace mxattn::cuda::detail
