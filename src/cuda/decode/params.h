// The one parameter struct of the decode kernels, and the plan's device-side tables. Filled on the
// host by decode/plan.cpp from a validated problem; the kernels never check arguments.
#pragma once

#include <cstdint>

#include "cuda/combine/combine.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

// The rows of one CTA: the packed rows (head of the group, query row) of a query tile, 16 at a
// time, so that every query head of a KV group shares each K/V load.
inline constexpr int kRowsPerBlock = 16;
inline constexpr int kWarps = 4;
inline constexpr int kStepKeys = 16;  // keys one warp consumes per main-loop step

// The keys of one CTA of the split kernel: split j of the CTA covers the split_keys keys from
// key_begin + j * split_keys; [load_lo, load_hi] are the keys of the CTA's splits that some row of
// its query tile sees, [full_lo, full_hi] those that every row sees. Computed once on the host
// rather than by every thread of the CTA, whose first copies they would delay behind a 64-bit
// division.
struct CtaKeys {
  int64_t key_begin = 0;
  int64_t split_keys = 0;
  int64_t load_lo = 0;
  int64_t load_hi = -1;
  int64_t full_lo = 0;
  int64_t full_hi = -1;
};

// One CTA of the split kernel (times heads_kv * row_blocks in gridDim.y), with what it needs of
// its query tile and sequence, so that a CTA starts from a single load. The CTA computes splits
// [split, split + chain) of its tile, one after the other, its copies running on from one split
// into the next.
struct WorkItem {
  int32_t b = 0;
  int32_t q_tile = 0;
  int32_t split = 0;  // the first split of the CTA
  int64_t last = -1;  // the sequence's core::Visibility (from Problem::visibility)
  int64_t offset = 0;
  int32_t count = 0;  // the tile's exact count
  int32_t chain = 1;  // consecutive splits of the tile this CTA computes
  CtaKeys keys;       // filled by plan_decode once the chain is set
};

// The decode kernels' parameters: what the combine reads and writes (the base: O, LSE, partials,
// counts, tile table, shape), then the inputs and the plan's tables.
struct DecodeParams : CombineParams {
  // Q [B, Sq, Hq, Dqk] in element strides; MX Q has E8M0 scales [B, Sq, Hq, Dqk/32].
  const void* q = nullptr;
  DType q_dtype = DType::f32;
  bool q_split_lo = false;  // the key product type cannot hold Q exactly: add its rounding error
  // 16-bit Q whose rows are contiguous and 16-byte aligned: read 8 elements a load (params_for
  // sets it per run, from the run's pointer).
  bool q_rows_vectorized = false;
  int64_t q_stride[4] = {};
  const uint8_t* q_scales = nullptr;
  int64_t q_scale_stride[4] = {};

  // K and V rows: (batch or page, key or slot, kv head) in bytes; the head dim is contiguous.
  const uint8_t* k = nullptr;
  int64_t k_stride[3] = {};
  const uint8_t* v = nullptr;
  int64_t v_stride[3] = {};
  // Contiguous E8M0 scales. K: [outer, slots, Hkv, Dqk/32]. V along the head dim: [outer, slots,
  // Hkv, Dv/32]; along the keys: [outer, Hkv, ceil(slots/32), Dv].
  const uint8_t* k_scales = nullptr;
  const uint8_t* v_scales = nullptr;
  bool v_scales_along_keys = false;
  int64_t kv_slots = 0;  // keys per batch entry (dense) or per page (paged)

  bool write_all_partials = false;  // the user asked for the partials: write them for every tile
  // The fused combine: one arrival counter per (batch entry, query tile, blockIdx.y), all zero
  // between runs; the split kernel's last CTA of a tile with two or more splits combines the
  // tile's rows (combine_rows.cuh) and zeroes the counter again. Null: the combine kernel runs.
  int32_t* arrivals = nullptr;

  // The plan's device tables (the tile table is the combine's).
  const WorkItem* work = nullptr;        // [gridDim.x]
  const int32_t* block_table = nullptr;  // paged: [B, max_pages]
  int64_t block_table_stride = 0;

  int64_t heads_kv = 0;
  int64_t group = 1;
  int64_t page_size = 0;  // 0: dense
  bool causal = false;
  int64_t window = -1;
  float scale_log2 = 0.0f;  // softmax scale times log2(e)

  int64_t tile_n = 32;
  int64_t row_blocks = 1;  // ceil(tile rows * group / kRowsPerBlock)
};

}  // namespace mxattn::cuda::detail
