// The combine of split partials on the GPU (spec §3): its parameters, shared by every engine that
// splits keys (decode, prefill), and the host handle of its kernel.
#pragma once

#include <cstdint>

#include "cuda/common/launch.h"
#include "mxattn/combine.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

// One query tile's partition, from core::query_tile on the host.
struct TileInfo {
  int64_t run_begin = 0;
  int64_t run_count = 0;
  int32_t splits = 1;
  int32_t count = 0;
};

// What the combine reads and writes: the partials, the tile table that gives each row its exact
// count, and the final O, LSE and counts. The decode kernels' parameters extend it (their last CTA
// of a tile combines the tile's rows itself).
struct CombineParams {
  // Partials O_s [S, B, Sq, Hq, Dv] and L_s [S, B, Hq, Sq], f32: the user's views or a workspace.
  float* part_o = nullptr;
  int64_t part_o_stride[5] = {};
  float* part_lse = nullptr;
  int64_t part_lse_stride[4] = {};
  // O [B, Sq, Hq, Dv] and LSE [B, Hq, Sq] (optional) in element strides.
  void* o = nullptr;
  DType o_dtype = DType::f32;
  int64_t o_stride[4] = {};
  float* lse = nullptr;
  int64_t lse_stride[3] = {};
  int32_t* counts = nullptr;  // optional exact counts [B, Hq, Sq]
  int64_t counts_stride[3] = {};

  const TileInfo* tiles = nullptr;  // [B, tile_heads, q_tiles]
  int64_t batch = 0;
  int64_t seq_q = 0;
  int64_t heads_q = 0;
  int64_t dim_v = 0;
  int64_t tile_m = 16;
  int64_t q_tiles = 1;
  int64_t tile_heads = 1;  // 1: one tile table per batch entry; heads_q: one per (b, h)
};

// The combine kernel: one warp per output row, kCombineRowsPerBlock rows per CTA.
inline constexpr int kCombineRowsPerBlock = 4;
KernelRef combine_kernel();

// The combine kernel over every output row (batch x query row x query head): one warp per row.
// `early_start`: it directly follows the kernel that writes the partials and waits for that grid.
inline Status launch_combine(CombineParams& params, void* stream, bool early_start = false) {
  const int64_t rows = params.batch * params.seq_q * params.heads_q;
  const dim3 grid(unsigned((rows + kCombineRowsPerBlock - 1) / kCombineRowsPerBlock));
  return launch(combine_kernel(), grid, dim3(kCombineRowsPerBlock * 32), params, stream,
                early_start, "combine kernel launch");
}

// mxattn::combine and merge_states on checked device views (user_combine.cu), on `stream`.
Status combine_on_device(const CombineArgs& args, void* stream);
Status merge_on_device(const MergeArgs& args, void* stream);

}  // namespace mxattn::cuda::detail
