// The one parameter struct of the prefill kernels. Filled on the host by prefill_api.cpp from a
// validated problem; the kernels never check arguments. Plain C++: the API layer sees no device
// code.
#pragma once

#include <cstdint>

#include "cuda/combine/combine.h"
#include "mxattn/config.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::prefill {

// One query tile's spec §3 partition: the decode engine's table, which its combine kernel (shared
// by both engines) reads.
using detail::TileInfo;

// Keys and rows of a query tile are grouped by 16 for the sparse walk: a BSR block (16..256 keys
// or rows, a power of two) starts and ends on such a boundary, and so does every key tile.
inline constexpr int kSparseGranule = 16;

// MX inputs are read in groups of 8 consecutive codes of a row (mx_group.cuh): a group's bytes
// (FP8 8, FP6 6, FP4 4), and the alignment its plain vector loads need (FP6: three 2-byte loads).
MXATTN_HD constexpr int mx_group_bytes(DType t) {
  return bits_of(t);  // 8 codes of bits_of(t) bits
}
MXATTN_HD constexpr int mx_group_align(DType t) {
  return mx_group_bytes(t) == 6 ? 2 : mx_group_bytes(t);
}

// One key tile of a sparse CTA's walk: the kernel's key tile `key_tile` and which of its keys each
// group of 16 query rows sees as far as the layout and the CTA's split go (masks apply on top).
// Bit `present_bit(g, c, granules)` covers rows [16 g, 16 g + 16) of the query tile and keys
// [16 c, 16 c + 16) of the key tile, with `granules` = ceil(tile_n / 16) groups of keys per tile.
struct SparseTile {
  int64_t key_tile = 0;
  uint64_t present = 0;
};

MXATTN_HD constexpr int present_bit(int row_group, int key_group, int granules) {
  return row_group * granules + key_group;
}

// One CTA of the prefill kernel (times gridDim.y heads), with everything it needs of its query
// tile, split and sequence, so that a CTA starts from a single load.
struct WorkItem {
  int32_t b = 0;
  int32_t q_tile = 0;
  int32_t split = 0;
  int32_t head = 0;  // the CTA's query head is head + blockIdx.y
  // Dense: key tiles [tile_first, tile_first + tile_count) of this split. Sparse: entries
  // [tile_first, tile_first + tile_count) of PrefillParams::sparse_tiles, in increasing key tile.
  int64_t tile_first = 0;
  int64_t tile_count = 0;
  int64_t last = -1;  // the sequence's core::Visibility (from Problem::visibility)
  int64_t offset = 0;
  // Bit g: rows [16 g, 16 g + 16) of the tile store O and LSE (final_rows), or this split's O_s
  // and L_s (partial_rows). With a sparse layout the query blocks of one CTA may differ in their
  // splits and counts, so the plan decides per group of rows.
  uint32_t final_rows = 0;
  uint32_t partial_rows = 0;
};

struct PrefillParams {
  // Q [B, Sq, Hq, Dqk], K [B, Sk, Hkv, Dqk], V [B, Sk, Hkv, Dv]: element strides of the first three
  // axes; the head dim is contiguous. Size-one axes carry any stride the TMA accepts.
  const void* q = nullptr;
  int64_t q_stride[3] = {};
  // Q as MX codes (KernelTraits::kQCodes): q points at the packed codes, q_stride counts elements,
  // and q_scales holds the E8M0 scales [B, Sq, Hq, Dqk / 32] with element strides q_scale_stride.
  DType q_dtype = DType::bf16;
  const uint8_t* q_scales = nullptr;
  int64_t q_scale_stride[4] = {};
  bool q_aligned_groups = false;  // every 8-code group of Q mx_group_align-aligned
  const void* k = nullptr;
  int64_t k_stride[3] = {};
  const void* v = nullptr;
  int64_t v_stride[3] = {};

  // O [B, Sq, Hq, Dv] and LSE [B, Hq, Sq] (optional) in element strides; `o_pairs`: two adjacent
  // head-dim elements can be stored as one aligned word; `o_chunks`: O is 16-bit and each run of
  // eight head-dim elements from a multiple of 8 is one aligned 16-byte chunk.
  void* o = nullptr;
  DType o_dtype = DType::f32;
  int64_t o_stride[4] = {};
  bool o_pairs = false;
  bool o_chunks = false;
  float* lse = nullptr;
  int64_t lse_stride[3] = {};
  // Partials O_s [S, B, Sq, Hq, Dv] and L_s [S, B, Hq, Sq]: the user's views or the workspace.
  float* part_o = nullptr;
  int64_t part_o_stride[5] = {};
  bool part_o_pairs = false;
  float* part_lse = nullptr;
  int64_t part_lse_stride[4] = {};

  // The plan's device tables.
  const WorkItem* work = nullptr;            // [gridDim.x]
  const SparseTile* sparse_tiles = nullptr;  // sparse layouts: every CTA's key tiles; else null

  int64_t batch = 0;
  int64_t seq_q = 0;
  int64_t seq_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t group = 1;
  bool causal = false;
  int64_t window = -1;
  float scale = 0.0f;       // softmax scale (natural log), for the LSE
  float scale_log2 = 0.0f;  // softmax scale times log2(e), for exp2
};

}  // namespace mxattn::cuda::prefill
