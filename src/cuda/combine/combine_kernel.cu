// spec §3's combine of split partials on the GPU as a kernel of its own: one warp per output row
// (b, i, h), combine_rows.cuh's combine_row. Rows whose query tile has fewer than two non-empty
// splits were written by the split kernel, and so were all rows when it combined them itself.
#include <cstdint>

#include "cuda/combine/combine.h"
#include "cuda/combine/combine_rows.cuh"
#include "cuda/common/device_ops.cuh"

namespace mxattn::cuda::detail {
namespace {

__global__ void __launch_bounds__(kCombineRowsPerBlock * 32)
    combine_splits_kernel(const __grid_constant__ CombineParams p) {
  // Launched right behind the split kernel (programmatic dependent launch): its partials are
  // complete and visible only after this wait.
  wait_for_prerequisite_grid();
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kCombineRowsPerBlock + (threadIdx.x >> 5);
  if (row >= p.batch * p.seq_q * p.heads_q) return;
  const int64_t h = row % p.heads_q;
  const int64_t i = (row / p.heads_q) % p.seq_q;
  const int64_t b = row / (p.heads_q * p.seq_q);
  const TileInfo tile = p.tiles[(b * p.tile_heads + h % p.tile_heads) * p.q_tiles + i / p.tile_m];
  if (p.counts != nullptr && lane == 0) {
    p.counts[b * p.counts_stride[0] + h * p.counts_stride[1] + i * p.counts_stride[2]] = tile.count;
  }
  const int count = tile.count;
  if (count < 2) return;

  combine_row(p, b, i, h, count, lane);
}

}  // namespace

KernelRef combine_kernel() {
  return {reinterpret_cast<const void*>(&combine_splits_kernel), 0};
}

}  // namespace mxattn::cuda::detail
