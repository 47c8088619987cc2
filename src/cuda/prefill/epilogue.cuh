// Stores a CTA's result: O normalized by its row sums (exactly +0 for rows that saw nothing) in the
// output type, the LSE, and, for a split tile, the f32 partials O_s and L_s of spec §3.
//
// The common case (16-bit O whose rows are whole aligned 16-byte chunks, no partials) goes through
// shared memory and out in 16-byte chunks (store_tile_staged); every other case from registers,
// adjacent head-dim columns as one word where the layout allows (store_tile), with the type and
// layout chosen once per tile. The epilogue runs once per CTA as unrolled straight-line code that
// the instruction cache does not hold, so its length is its cost: the earlier register path, a
// runtime type and layout choice at every element (some 10,000 instructions at Dv 256), took 26% of
// the Dv 256 kernel's warp samples in Nsight Compute, most of them waiting for instructions.
#pragma once

#include <cute/tensor.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/prefill/fragments.cuh"
#include "cuda/prefill/kernel_traits.cuh"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/softmax.cuh"
#include "cuda/prefill/tile_scheduler.cuh"

namespace mxattn::cuda::prefill {

// Two adjacent values of a row rounded to Out (round to nearest even), as Out's array of two.
template <class Out>
__device__ __forceinline__ cutlass::Array<Out, 2> round_pair(float x0, float x1) {
  cutlass::Array<float, 2> x;
  x[0] = x0;
  x[1] = x1;
  return cutlass::NumericArrayConverter<Out, float, 2,
                                        cutlass::FloatRoundStyle::round_to_nearest>::convert(x);
}

// Two adjacent elements as one aligned write (8 bytes for f32, 4 for 16-bit types).
template <class Out>
__device__ __forceinline__ void store_two(Out* at, const cutlass::Array<Out, 2>& v) {
  using Word = std::conditional_t<sizeof(Out) == 4, float2, uint32_t>;
  static_assert(sizeof(Word) == sizeof(v));
  Word word;
  std::memcpy(&word, &v, sizeof(word));
  *reinterpret_cast<Word*>(at) = word;
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

// One output (O or the partials) from registers: the thread's rows for which `stores(tile row)`,
// each at `row_offset(row)` elements of `out` with head-dim stride `stride_d`; with kPairs two
// adjacent columns as one aligned write. The type and layout are template arguments, so that the
// unrolled code that runs has a few instructions per pair.
template <class Out, bool kPairs, int kBlockM, int kDimV, class TiledMma, int kRows, class FragO,
          class Stores, class RowOffset>
__device__ __forceinline__ void store_rows(Out* out, int64_t stride_d, const FragO& acc,
                                           const RowResult (&rows)[kRows], int thread_idx,
                                           const Stores& stores, const RowOffset& row_offset) {
  const auto coords = TiledMma{}
                          .get_thread_slice(thread_idx)
                          .partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kDimV>>{}));
  const auto o = rows_cols_view(acc);
  const auto c = rows_cols_view(coords);
  static_assert(decltype(size<0>(o))::value == kRows);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int tile_row = get<0>(c(r, 0));
    if (!stores(tile_row)) continue;
    Out* row = out + row_offset(tile_row);
    const float inv_sum = rows[r].empty ? 0.0f : rows[r].inv_sum;
#pragma unroll
    for (int col = 0; col < size<1>(o); col += 2) {
      const int64_t d = get<1>(c(0, col));
      // A row that saw nothing is exactly +0, whatever its (masked) products met in V.
      const float x0 = rows[r].empty ? 0.0f : o(r, col) * inv_sum;
      const float x1 = rows[r].empty ? 0.0f : o(r, col + 1) * inv_sum;
      const cutlass::Array<Out, 2> v = round_pair<Out>(x0, x1);
      if constexpr (kPairs) {
        store_two(row + d, v);
      } else {
        row[d * stride_d] = v[0];
        row[(d + 1) * stride_d] = v[1];
      }
    }
  }
}

// The register path: O in its type and the f32 partials, each rows' worth at a time.
template <int kBlockM, int kDimV, class TiledMma, int kRows, class FragO>
__device__ __forceinline__ void store_tile(const PrefillParams& p, const CtaWork& w,
                                           const FragO& acc, const RowResult (&rows)[kRows],
                                           int thread_idx) {
  const auto in_sq = [&](int tile_row) { return w.row_first + tile_row <= w.row_last; };
  const auto final_row = [&](int tile_row) { return in_sq(tile_row) && w.writes_final(tile_row); };
  const auto o_row = [&](int tile_row) {
    return w.b * p.o_stride[0] + (w.row_first + tile_row) * p.o_stride[1] + w.h * p.o_stride[2];
  };
  const auto final_out = [&](auto* out) {
    using Out = std::remove_pointer_t<decltype(out)>;
    if (p.o_pairs) {
      store_rows<Out, true, kBlockM, kDimV, TiledMma>(out, 1, acc, rows, thread_idx, final_row,
                                                      o_row);
    } else {
      store_rows<Out, false, kBlockM, kDimV, TiledMma>(out, p.o_stride[3], acc, rows, thread_idx,
                                                       final_row, o_row);
    }
  };
  if (w.final_rows != 0) {
    if (p.o_dtype == DType::f32) {
      final_out(static_cast<float*>(p.o));
    } else if (p.o_dtype == DType::bf16) {
      final_out(static_cast<cutlass::bfloat16_t*>(p.o));
    } else {
      final_out(static_cast<cutlass::half_t*>(p.o));
    }
  }
  if (w.partial_rows != 0) {
    const auto partial_row = [&](int tile_row) {
      return in_sq(tile_row) && w.writes_partial(tile_row);
    };
    const auto part_row = [&](int tile_row) {
      return w.split * p.part_o_stride[0] + w.b * p.part_o_stride[1] +
             (w.row_first + tile_row) * p.part_o_stride[2] + w.h * p.part_o_stride[3];
    };
    if (p.part_o_pairs) {
      store_rows<float, true, kBlockM, kDimV, TiledMma>(p.part_o, 1, acc, rows, thread_idx,
                                                        partial_row, part_row);
    } else {
      store_rows<float, false, kBlockM, kDimV, TiledMma>(p.part_o, p.part_o_stride[4], acc, rows,
                                                         thread_idx, partial_row, part_row);
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
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int tile_row = get<0>(c(r, 0));
    const float inv_sum = rows[r].empty ? 0.0f : rows[r].inv_sum;
#pragma unroll
    for (int col = 0; col < size<1>(o); col += 2) {
      // A row that saw nothing is exactly +0, whatever its (masked) products met in V.
      const float x0 = rows[r].empty ? 0.0f : o(r, col) * inv_sum;
      const float x1 = rows[r].empty ? 0.0f : o(r, col + 1) * inv_sum;
      store_two(&sO(tile_row, get<1>(c(0, col))), round_pair<Out>(x0, x1));
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
