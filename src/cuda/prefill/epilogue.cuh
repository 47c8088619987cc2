// Stores a CTA's result from registers: O normalized by its row sums (exactly +0 for rows that saw
// nothing) in the output type, the LSE, and, for a split tile, the f32 partials O_s and L_s of
// SPEC 3. Adjacent head-dim columns go out as one word where the layout allows.
#pragma once

#include <cute/tensor.hpp>

#include <cstdint>

#include "core/float16.h"
#include "cuda/prefill/fragments.cuh"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/softmax.cuh"
#include "cuda/prefill/tile_scheduler.cuh"

namespace mxattn::cuda::prefill {

__device__ __forceinline__ uint16_t to_storage(float x, DType type) {
  return type == DType::bf16 ? core::float_to_bf16(x) : core::float_to_f16(x);
}

// Columns d and d + 1 of one row at `offset` (element units) of an output of type `type`.
__device__ __forceinline__ void store_pair(void* base, DType type, int64_t offset, int64_t stride_d,
                                           bool pairs, float x0, float x1) {
  if (type == DType::f32) {
    float* out = static_cast<float*>(base) + offset;
    if (pairs) {
      *reinterpret_cast<float2*>(out) = make_float2(x0, x1);
    } else {
      out[0] = x0;
      out[stride_d] = x1;
    }
    return;
  }
  uint16_t* out = static_cast<uint16_t*>(base) + offset;
  const uint16_t lo = to_storage(x0, type), hi = to_storage(x1, type);
  if (pairs) {
    *reinterpret_cast<uint32_t*>(out) = uint32_t(lo) | uint32_t(hi) << 16;
  } else {
    out[0] = lo;
    out[stride_d] = hi;
  }
}

template <int kBlockM, int kDimV, class TiledMma, int kRows, class FragO>
__device__ __forceinline__ void store_tile(const PrefillParams& p, const CtaWork& w,
                                           const FragO& acc, const RowResult (&rows)[kRows],
                                           int thread_idx) {
  const auto coords = TiledMma{}
                          .get_thread_slice(thread_idx)
                          .partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kDimV>>{}));
  const auto o = rows_cols_view(acc);
  const auto c = rows_cols_view(coords);
  static_assert(decltype(size<0>(o))::value == kRows);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int tile_row = get<0>(c(r, 0));
    const int64_t i = w.row_first + tile_row;
    const bool final_out = w.writes_final(tile_row);
    const bool partial_out = w.writes_partial(tile_row);
    if (i > w.row_last || !(final_out || partial_out)) continue;
    const RowResult& row = rows[r];
    const int64_t o_row = w.b * p.o_stride[0] + i * p.o_stride[1] + w.h * p.o_stride[2];
    const int64_t part_row = w.split * p.part_o_stride[0] + w.b * p.part_o_stride[1] +
                             i * p.part_o_stride[2] + w.h * p.part_o_stride[3];
#pragma unroll
    for (int col = 0; col < size<1>(o); col += 2) {
      const int64_t d = get<1>(c(0, col));
      const float x0 = row.empty ? 0.0f : o(r, col) * row.inv_sum;
      const float x1 = row.empty ? 0.0f : o(r, col + 1) * row.inv_sum;
      if (final_out) {
        store_pair(p.o, p.o_dtype, o_row + d * p.o_stride[3], p.o_stride[3], p.o_pairs, x0, x1);
      }
      if (partial_out) {
        store_pair(p.part_o, DType::f32, part_row + d * p.part_o_stride[4], p.part_o_stride[4],
                   p.part_o_pairs, x0, x1);
      }
    }
    // The four threads of a quad share the row; the first writes its LSE.
    if (thread_idx % 4 != 0) continue;
    if (final_out && p.lse != nullptr) {
      p.lse[w.b * p.lse_stride[0] + w.h * p.lse_stride[1] + i * p.lse_stride[2]] = row.lse;
    }
    if (partial_out) {
      p.part_lse[w.split * p.part_lse_stride[0] + w.b * p.part_lse_stride[1] +
                 w.h * p.part_lse_stride[2] + i * p.part_lse_stride[3]] = row.lse;
    }
  }
}

}  // namespace mxattn::cuda::prefill
