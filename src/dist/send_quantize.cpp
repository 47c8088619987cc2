#include "dist/send_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/host_tensor.h"
#include "dist/layout.h"
#include "mx/formats.h"
#include "mxattn/mx.h"

namespace mxattn::dist {
namespace {

std::vector<int64_t> shape_of(const TensorView& v) {
  return std::vector<int64_t>(v.shape, v.shape + v.rank);
}

// A shard tensor readable on the host: the view itself, or a staging copy from the GPU.
Status read_on_host(Communicator& comm, const TensorView& v, base::HostTensor* staging,
                    TensorView* readable) {
  if (comm.memory() == MemorySpace::host) {
    *readable = v;
    return Status::ok();
  }
  *staging = base::HostTensor(v.dtype, shape_of(v));
  if (Status st = comm.copy_to_host(staging->view().data, v.data, staging->bytes()); !st) {
    return st;
  }
  *readable = staging->view();
  return Status::ok();
}

// A new contiguous tensor in the communicator's memory, filled through a host view: the buffer
// itself in host memory, a staging copy (published afterwards) otherwise.
class Outgoing {
 public:
  Status allocate(Communicator& comm, DType dtype, const std::vector<int64_t>& shape,
                  Buffer* buffer) {
    staging_ = base::HostTensor(dtype, shape);
    if (Status st = Buffer::allocate(comm, staging_.bytes(), buffer); !st) return st;
    comm_ = staging_.view();
    comm_.data = buffer->data();
    host_ = comm.memory() == MemorySpace::host ? comm_ : staging_.view();
    return Status::ok();
  }
  const TensorView& host() const { return host_; }
  const TensorView& view() const { return comm_; }
  Status publish(Communicator& comm) const {
    if (host_.data == comm_.data) return Status::ok();
    return comm.copy_from_host(comm_.data, host_.data, comm_.bytes);
  }

 private:
  base::HostTensor staging_;
  TensorView host_;
  TensorView comm_;
};

// Q, K, or V blocked along the head dim: each block lies within one token of this rank. In device
// memory the GPU quantizes the shard straight into the outgoing buffers, on the communicator's
// stream; in host memory the host does.
Status quantize_along_head_dim(Communicator& comm, const TensorView& src, DType format,
                               ScaleMode mode, Buffer* data_buffer, Buffer* scales_buffer,
                               TensorView* data, TensorView* scales) {
  if (comm.memory() == MemorySpace::cuda) {
    std::vector<int64_t> scale_shape = shape_of(src);
    scale_shape[3] /= kMxBlock;
    TensorView codes;
    codes.dtype = format;
    codes.rank = src.rank;
    std::copy(src.shape, src.shape + src.rank, codes.shape);
    set_contiguous_strides(codes);
    codes.bytes = bytes_needed(codes).value_or(0);
    TensorView block_scales;
    block_scales.dtype = DType::e8m0;
    block_scales.rank = src.rank;
    std::copy(scale_shape.begin(), scale_shape.end(), block_scales.shape);
    set_contiguous_strides(block_scales);
    block_scales.bytes = bytes_needed(block_scales).value_or(0);
    if (Status st = Buffer::allocate(comm, codes.bytes, data_buffer); !st) return st;
    if (Status st = Buffer::allocate(comm, block_scales.bytes, scales_buffer); !st) return st;
    codes.data = data_buffer->data();
    block_scales.data = scales_buffer->data();
    if (src.numel() > 0) {
      if (Status st = quantize(src, codes, block_scales, 3, mode, comm.stream()); !st) return st;
    }
    *data = codes;
    *scales = block_scales;
    return Status::ok();
  }
  base::HostTensor staging;
  TensorView readable;
  if (Status st = read_on_host(comm, src, &staging, &readable); !st) return st;
  std::vector<int64_t> scale_shape = shape_of(src);
  scale_shape[3] /= kMxBlock;
  Outgoing codes, block_scales;
  if (Status st = codes.allocate(comm, format, shape_of(src), data_buffer); !st) return st;
  if (Status st = block_scales.allocate(comm, DType::e8m0, scale_shape, scales_buffer); !st) {
    return st;
  }
  if (src.numel() > 0) {
    if (Status st = quantize(readable, codes.host(), block_scales.host(), 3, mode); !st) return st;
  }
  if (Status st = codes.publish(comm); !st) return st;
  if (Status st = block_scales.publish(comm); !st) return st;
  *data = codes.view();
  *scales = block_scales.view();
  return Status::ok();
}

// The largest finite magnitude and whether a non-finite value occurs, per (b, h, d), among this
// rank's keys of each straddled block: [block][B][Hkv][Dv] maxima, then as many 0/1 flags.
std::vector<float> block_extremes(const TensorView& v, const Shard& keys,
                                  const std::vector<int64_t>& blocks) {
  const int64_t B = v.shape[0], H = v.shape[2], D = v.shape[3], row = H * D;
  const int64_t per_block = B * row;
  std::vector<float> out(blocks.size() * size_t(per_block) * 2, 0.0f);
  for (size_t n = 0; n < blocks.size(); ++n) {
    float* amax = out.data() + n * size_t(per_block);
    float* nonfinite = amax + blocks.size() * size_t(per_block);
    const int64_t first = std::max(keys.offset, blocks[n] * kMxBlock);
    const int64_t last = std::min(keys.end(), (blocks[n] + 1) * kMxBlock);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = first; j < last; ++j) {
        const int64_t base = (b * keys.length + (j - keys.offset)) * row;
        for (int64_t e = 0; e < row; ++e) {
          const float x = base::load_float(v, base + e);
          if (std::isfinite(x)) {
            amax[b * row + e] = std::max(amax[b * row + e], std::fabs(x));
          } else {
            nonfinite[b * row + e] = 1.0f;
          }
        }
      }
    }
  }
  return out;
}

// V blocked along the keys. The rank quantizes its keys inside the whole blocks that hold them
// ([first block * 32, end of last block), clipped to the sequence): the other ranks' keys of a
// straddled block are stood in for by one slot holding the agreed maximum (or NaN, where the format
// marks a block holding a non-finite value with the NaN scale), and zeros; `quantize` then finds
// exactly the scale the whole block has. Returns this rank's keys' codes and the carried blocks'
// scales.
Status quantize_along_keys(Communicator& comm, const Geometry& g, const TensorView& src,
                           DType format, ScaleMode mode, Buffer* data_buffer, Buffer* scales_buffer,
                           TensorView* data, TensorView* scales) {
  const Shard keys = g.kv_shards[size_t(g.rank)];
  const std::vector<int64_t> straddled = straddled_key_blocks(g.kv_shards);
  base::HostTensor staging;
  TensorView readable;
  if (Status st = read_on_host(comm, src, &staging, &readable); !st) return st;
  std::vector<float> extremes = block_extremes(readable, keys, straddled);
  if (!straddled.empty()) {
    if (Status st = comm.all_reduce_max(extremes.data(), int64_t(extremes.size())); !st) return st;
  }

  const int64_t B = src.shape[0], H = src.shape[2], D = src.shape[3], row = H * D;
  const Shard carried = carried_key_blocks(keys);
  Outgoing codes, block_scales;
  if (Status st = codes.allocate(comm, format, {B, keys.length, H, D}, data_buffer); !st) return st;
  if (Status st =
          block_scales.allocate(comm, DType::e8m0, {B, H, carried.length, D}, scales_buffer);
      !st) {
    return st;
  }
  *data = codes.view();
  *scales = block_scales.view();
  if (keys.length == 0) return Status::ok();

  const int64_t first_block = keys.offset / kMxBlock;
  const int64_t padded_first = first_block * kMxBlock;
  const int64_t padded_end = std::min(g.seq_k(), (keys.end() + kMxBlock - 1) / kMxBlock * kMxBlock);
  const int64_t padded = padded_end - padded_first;
  const int64_t lead = keys.offset - padded_first;
  base::HostTensor values(DType::f32, {B, padded, H, D});
  float* x = values.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < keys.length; ++j) {
      for (int64_t e = 0; e < row; ++e) {
        x[(b * padded + lead + j) * row + e] =
            base::load_float(readable, (b * keys.length + j) * row + e);
      }
    }
  }
  const int64_t per_block = B * row;
  const bool nan_marks_block = !mx::has_nonfinite_codes(format);
  for (size_t n = 0; n < straddled.size(); ++n) {
    const int64_t block_first = straddled[n] * kMxBlock;
    const int64_t block_end = std::min(g.seq_k(), block_first + kMxBlock);
    if (block_end <= padded_first || block_first >= padded_end) continue;
    // The first key of the block that is not this rank's: it stands in for the others.
    const int64_t stand_in = block_first < keys.offset ? block_first : keys.end();
    const float* amax = extremes.data() + n * size_t(per_block);
    const float* nonfinite = amax + straddled.size() * size_t(per_block);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t e = 0; e < row; ++e) {
        const bool mark = nan_marks_block && nonfinite[b * row + e] != 0.0f;
        x[(b * padded + stand_in - padded_first) * row + e] = mark ? NAN : amax[b * row + e];
      }
    }
  }
  const int64_t padded_blocks = (padded + kMxBlock - 1) / kMxBlock;
  base::HostTensor padded_codes(format, {B, padded, H, D});
  base::HostTensor padded_scales(DType::e8m0, {B, H, padded_blocks, D});
  if (Status st = quantize(values.view(), padded_codes.view(),
                           permuted(padded_scales.view(), {0, 2, 1, 3}), 1, mode);
      !st) {
    return st;
  }
  // Keep this rank's keys, and the blocks it carries (a leading shared block is its neighbour's).
  const int64_t code_row = *contiguous_bytes(format, row);
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(static_cast<std::byte*>(codes.host().data) + b * keys.length * code_row,
                padded_codes.data<std::byte>() + (b * padded + lead) * code_row,
                size_t(keys.length * code_row));
  }
  const int64_t skipped = carried.offset - first_block;
  for (int64_t bh = 0; bh < B * H; ++bh) {
    std::memcpy(static_cast<std::byte*>(block_scales.host().data) + bh * carried.length * D,
                padded_scales.data<std::byte>() + (bh * padded_blocks + skipped) * D,
                size_t(carried.length * D));
  }
  if (Status st = codes.publish(comm); !st) return st;
  return block_scales.publish(comm);
}

}  // namespace

Status prepare_travelling_shard(Communicator& comm, const Geometry& g, const AttentionArgs& shard,
                                const SendQuantization& sq, TravellingShard* out) {
  TravellingShard& t = *out;
  t.q = shard.q;
  t.q_scales = shard.q_scales;
  t.k = shard.k;
  t.k_scales = shard.k_scales;
  t.v = shard.v;
  t.v_scales = shard.v_scales;
  if (sq.q) {
    if (Status st = quantize_along_head_dim(comm, shard.q, *sq.q, sq.mode, &t.storage[0],
                                            &t.storage[1], &t.q, &t.q_scales);
        !st) {
      return st;
    }
  }
  if (sq.k) {
    if (Status st = quantize_along_head_dim(comm, shard.k, *sq.k, sq.mode, &t.storage[2],
                                            &t.storage[3], &t.k, &t.k_scales);
        !st) {
      return st;
    }
  }
  if (sq.v) {
    const Status st = g.v_along_keys()
                          ? quantize_along_keys(comm, g, shard.v, *sq.v, sq.mode, &t.storage[4],
                                                &t.storage[5], &t.v, &t.v_scales)
                          : quantize_along_head_dim(comm, shard.v, *sq.v, sq.mode, &t.storage[4],
                                                    &t.storage[5], &t.v, &t.v_scales);
    if (!st) return st;
  }
  return Status::ok();
}

}  // namespace mxattn::dist
