// The tensors an all-to-all moves, seen as byte grids with a sequence axis and a head axis, and the
// 2D copies that move a box of (sequence rows, heads) from one grid to another. Every pack and
// unpack of the exchanges is such a box; the communicator runs the copies in its own memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mxattn/dist.h"
#include "mxattn/tensor.h"

namespace mxattn::dist {

// A contiguous byte array [outer, a, b, unit]: the last axis (`unit` bytes, e.g. one head's D
// elements, packed types included) always moves whole. The sequence axis is `a` and the heads `b`
// ([B, S, H, D] tensors), or the reverse ([B, H, S] LSE, V scales [B, Hkv, key blocks, Dv]).
struct Grid {
  std::byte* data = nullptr;
  int64_t outer = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t unit = 0;
  bool seq_major = true;  // [outer, seq, heads, unit]; false: [outer, heads, seq, unit]

  int64_t bytes() const { return outer * seq * heads * unit; }
};

// A contiguous grid of `seq` x `heads` at `data`, oriented like `like`.
inline Grid grid_like(const Grid& like, std::byte* data, int64_t seq, int64_t heads) {
  Grid g = like;
  g.data = data;
  g.seq = seq;
  g.heads = heads;
  return g;
}

// A contiguous [B, S, H, D] tensor: sequence rows, heads of D elements.
inline Grid token_grid(const TensorView& v) {
  return {static_cast<std::byte*>(v.data),        v.shape[0], v.shape[1], v.shape[2],
          *contiguous_bytes(v.dtype, v.shape[3]), true};
}

// V scales along the keys [B, Hkv, key blocks, Dv]: the sequence axis is the blocks.
inline Grid key_block_grid(const TensorView& v) {
  return {static_cast<std::byte*>(v.data), v.shape[0], v.shape[2], v.shape[1], v.shape[3], false};
}

// LSE [B, H, S] f32.
inline Grid lse_grid(const TensorView& v) {
  return {static_cast<std::byte*>(v.data), v.shape[0], v.shape[2], v.shape[1], 4, false};
}

// Position and size of a box in a grid: sequence rows [seq, seq + seq_count), heads [head, ...).
struct Box {
  int64_t seq = 0;
  int64_t head = 0;
};

// Appends the copies moving the box of `seq_count` x `head_count` at `from` in `src` to `to` in
// `dst`, for every outer index. Both grids have the same orientation and unit. Consecutive copies
// that continue each other are merged, so whole-row boxes become one copy.
void append_box(std::vector<Copy2D>* copies, const Grid& src, Box from, const Grid& dst, Box to,
                int64_t seq_count, int64_t head_count);

// Bytes of a box of the grid.
inline int64_t box_bytes(const Grid& g, int64_t seq_count, int64_t head_count) {
  return g.outer * seq_count * head_count * g.unit;
}

}  // namespace mxattn::dist
