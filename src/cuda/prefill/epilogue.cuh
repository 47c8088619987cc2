// Stores a CTA's result: O normalized by its row sums (exactly +0 for rows that saw nothing) in the
// output type, the LSE, and, for a split tile, the f32 partials O_s and L_s of SPEC 3.
//
// The common case (16-bit O whose rows are whole aligned 16-byte chunks, no partials) goes through
// shared memory and out in 16-byte chunks (store_tile_staged); every other case from registers,
// adjacent head-dim columns as one word where the layout allows (store_tile). The register path
// runs once per CTA as straight-line code of some 10,000 instructions at Dv 256 (a runtime type
// and layout choice at every element), which the instruction cache does not hold: Nsight Compute
// put 26% of the Dv 256 kernel's warp samples there, most of them waiting for instructions.
#pragma once

#include <cute/tensor.hpp>

#include <cstdint>

#include "core/float16.h"
#include "cuda/prefill/fragments.cuh"
#include "cuda/prefill/kernel_traits.cuh"
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

// Named barrier of one math warp group's staged store (ids 0-2 are the main loop's).
inline constexpr uint32_t kStoreBarrierBase = 3;

// The LSE of the thread's rows that store one (the first thread of each quad; the quad shares the
// row).
template <int kBlockM, int kDimV, class TiledMma, int kRows>
__device__ __forceinline__ void store_row_lse(const PrefillParams& p, const CtaWork& w,
                                              const RowResult (&rows)[kRows], int thread_idx) {
  if (thread_idx % 4 != 0) return;
  const auto coords = TiledMma{}
                          .get_thread_slice(thread_idx)
                          .partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kDimV>>{}));
  const auto c = rows_cols_view(coords);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int tile_row = get<0>(c(r, 0));
    const int64_t i = w.row_first + tile_row;
    if (i > w.row_last) continue;
    if (w.writes_final(tile_row) && p.lse != nullptr) {
      p.lse[w.b * p.lse_stride[0] + w.h * p.lse_stride[1] + i * p.lse_stride[2]] = rows[r].lse;
    }
    if (w.writes_partial(tile_row)) {
      p.part_lse[w.split * p.part_lse_stride[0] + w.b * p.part_lse_stride[1] +
                 w.h * p.part_lse_stride[2] + i * p.part_lse_stride[3]] = rows[r].lse;
    }
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
  }
  store_row_lse<kBlockM, kDimV, TiledMma>(p, w, rows, thread_idx);
}

// The staged store (PrefillParams::o_chunks, a CTA without partials): each math warp group writes
// its 64 rows of O, normalized and rounded (round to nearest even), into its own rows of Q's
// shared buffer, which nothing reads once the group's last S GEMM has completed (each group reads
// only its own rows of Q); then its 128 threads store them in 16-byte chunks, consecutive threads
// taking consecutive chunks of a row. The swizzle of Q's layout keeps both sides free of bank
// conflicts.
template <class Traits, class Out, class FragO, int kRows>
__device__ __forceinline__ void store_tile_staged(const PrefillParams& p, const CtaWork& w,
                                                  const FragO& acc, const RowResult (&rows)[kRows],
                                                  int thread_idx,
                                                  typename Traits::SharedStorage& st) {
  constexpr int kBlockM = Traits::kBlockM, kDimV = Traits::kDimV;
  using TiledMma = typename Traits::TiledMmaPV;
  static_assert(kDimV <= Traits::kDimQK, "O's rows fit in Q's");
  Tensor sO =
      make_tensor(make_smem_ptr(reinterpret_cast<Out*>(st.q)), typename Traits::SmemLayoutQ{});
  const auto coords = TiledMma{}
                          .get_thread_slice(thread_idx)
                          .partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kDimV>>{}));
  const auto o = rows_cols_view(acc);
  const auto c = rows_cols_view(coords);
  using Converter =
      cutlass::NumericArrayConverter<Out, float, 2, cutlass::FloatRoundStyle::round_to_nearest>;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int tile_row = get<0>(c(r, 0));
    const float inv_sum = rows[r].empty ? 0.0f : rows[r].inv_sum;
#pragma unroll
    for (int col = 0; col < size<1>(o); col += 2) {
      // A row that saw nothing is exactly +0, whatever its (masked) products met in V.
      cutlass::Array<float, 2> x;
      x[0] = rows[r].empty ? 0.0f : o(r, col) * inv_sum;
      x[1] = rows[r].empty ? 0.0f : o(r, col + 1) * inv_sum;
      *reinterpret_cast<cutlass::Array<Out, 2>*>(&sO(tile_row, get<1>(c(0, col)))) =
          Converter::convert(x);
    }
  }
  const int group = thread_idx / 128, group_thread = thread_idx % 128;
  cutlass::arch::NamedBarrier::sync(128, kStoreBarrierBase + group);

  constexpr int kChunks = kDimV / 8;  // 16-byte chunks of a row
  Out* out = static_cast<Out*>(p.o) + w.b * p.o_stride[0] + w.h * p.o_stride[2];
#pragma unroll 1
  for (int idx = group_thread; idx < 64 * kChunks; idx += 128) {
    const int tile_row = 64 * group + idx / kChunks, chunk = idx % kChunks;
    const int64_t i = w.row_first + tile_row;
    if (i > w.row_last || !w.writes_final(tile_row)) continue;
    *reinterpret_cast<uint4*>(out + i * p.o_stride[1] + 8 * chunk) =
        *reinterpret_cast<const uint4*>(&sO(tile_row, 8 * chunk));
  }
  store_row_lse<kBlockM, kDimV, TiledMma>(p, w, rows, thread_idx);
}

}  // namespace mxattn::cuda::prefill
