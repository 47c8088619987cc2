#include "dist/slice.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dist/agreement.h"
#include "dist/grid.h"
#include "dist/host_memory.h"
#include "mxattn/mx.h"

namespace mxattn::dist {
namespace {

// Copies the box of sequence rows `rows` (all heads) of `whole` into a new tensor of `shape`.
base::HostTensor cut(const TensorView& whole, const Grid& from, const Shard& rows,
                     const std::vector<int64_t>& shape) {
  base::HostTensor part(whole.dtype, shape);
  const Grid to =
      grid_like(from, static_cast<std::byte*>(part.view().data), rows.length, from.heads);
  std::vector<Copy2D> copies;
  append_box(&copies, from, {rows.offset, 0}, to, {0, 0}, rows.length, from.heads);
  host_copy_2d(copies.data(), int64_t(copies.size()));
  return part;
}

base::HostTensor nan_filled(DType dtype, const std::vector<int64_t>& shape) {
  base::HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) base::store_float(t.view(), i, NAN);
  return t;
}

}  // namespace

base::HostTensor token_rows(const TensorView& whole, const Shard& rows) {
  return cut(whole, token_grid(whole), rows,
             {whole.shape[0], rows.length, whole.shape[2], whole.shape[3]});
}

base::HostTensor lse_columns(const TensorView& whole, const Shard& columns) {
  return cut(whole, lse_grid(whole), columns, {whole.shape[0], whole.shape[1], columns.length});
}

Status slice_shard(const AttentionArgs& whole, const Shard& q_rows, const Shard& kv_rows,
                   ShardStorage* s, AttentionArgs* shard) {
  if (whole.paged.given()) return Status::invalid("slice_shard: a paged problem has no key rows");
  AttentionArgs a = whole;
  s->q = token_rows(whole.q, q_rows);
  s->k = token_rows(whole.k, kv_rows);
  s->v = token_rows(whole.v, kv_rows);
  a.q = s->q.view();
  a.k = s->k.view();
  a.v = s->v.view();
  if (whole.q_scales.given()) {
    s->q_scales = token_rows(whole.q_scales, q_rows);
    a.q_scales = s->q_scales.view();
  }
  if (whole.k_scales.given()) {
    s->k_scales = token_rows(whole.k_scales, kv_rows);
    a.k_scales = s->k_scales.view();
  }
  if (whole.v_scales.given()) {
    if (whole.v_scale_axis == VScaleAxis::keys) {
      if (kv_rows.length > 0 && kv_rows.offset % kMxBlock != 0) {
        return Status::invalid(
            "slice_shard: MX V with scales along the keys can be cut only at multiples of 32 "
            "keys, not at key " +
            std::to_string(kv_rows.offset) + " (or store V plain and quantize it before sending)");
      }
      const TensorView& w = whole.v_scales;
      const Shard blocks{kv_rows.offset / kMxBlock, (kv_rows.length + kMxBlock - 1) / kMxBlock};
      s->v_scales =
          cut(w, key_block_grid(w), blocks, {w.shape[0], w.shape[1], blocks.length, w.shape[3]});
    } else {
      s->v_scales = token_rows(whole.v_scales, kv_rows);
    }
    a.v_scales = s->v_scales.view();
  }
  const TensorView& o = whole.o;
  s->o = nan_filled(o.dtype, {o.shape[0], q_rows.length, o.shape[2], o.shape[3]});
  a.o = s->o.view();
  if (whole.lse.given()) {
    s->lse = nan_filled(DType::f32, {whole.lse.shape[0], whole.lse.shape[1], q_rows.length});
    a.lse = s->lse.view();
  }
  *shard = a;
  return Status::ok();
}

namespace {

// Every rank's local [outer, inner bytes] blocks put side by side: block o of rank r lands at
// (o * ranks + r) * inner, for O [B, S, heads] (outer B * S) and LSE [B, heads, S] (outer B).
Status side_by_side(Communicator& comm, const base::HostTensor& local, int64_t outer,
                    base::HostTensor* whole) {
  const int64_t ranks = comm.size(), bytes = local.bytes();
  std::vector<std::byte> all(static_cast<size_t>(bytes * ranks));
  if (Status st = comm.all_gather(local.view().data, bytes, all.data()); !st) return st;
  const int64_t inner = outer > 0 ? bytes / outer : 0;
  auto* out = static_cast<std::byte*>(whole->view().data);
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out + (o * ranks + r) * inner, all.data() + r * bytes + o * inner, size_t(inner));
  return Status::ok();
}

// A host copy of a tensor in the communicator's memory.
Status to_host(Communicator& comm, const TensorView& v, base::HostTensor* host) {
  *host = base::HostTensor(v.dtype, std::vector<int64_t>(v.shape, v.shape + v.rank));
  return comm.copy_to_host(host->view().data, v.data, v.bytes);
}

}  // namespace

Status single_process_on_gathered(Communicator& comm, const AttentionArgs& placed,
                                  const SendQuantization& quantization, const RunOptions& options,
                                  base::HostTensor* o_rows, base::HostTensor* lse_rows) {
  GatheredHeads gathered;
  Status st = gather_heads(comm, placed, quantization, &gathered);
  if (st) st = run_local_attention(comm, gathered, options);
  if (Status agreed = agree_on(comm, st); !agreed) return agreed;
  const AttentionArgs& local = gathered.args();
  const int64_t ranks = comm.size(), B = local.o.shape[0], Sq = local.o.shape[1];
  const int64_t n = local.o.shape[2];
  // This rank's rows: where its shard's rows sit, from every rank's row count.
  std::vector<int64_t> rows(static_cast<size_t>(ranks));
  const int64_t mine = placed.o.shape[1];
  if (Status s = comm.all_gather(&mine, sizeof(mine), rows.data()); !s) return s;
  const Shard my_rows = contiguous_shards(rows)[size_t(comm.rank())];

  base::HostTensor local_o, whole_o(local.o.dtype, {B, Sq, n * ranks, local.o.shape[3]});
  if (Status s = to_host(comm, local.o, &local_o); !s) return s;
  if (Status s = side_by_side(comm, local_o, B * Sq, &whole_o); !s) return s;
  *o_rows = token_rows(whole_o.view(), my_rows);
  *lse_rows = base::HostTensor();
  if (!local.lse.given()) return Status::ok();
  base::HostTensor local_lse, whole_lse(DType::f32, {B, n * ranks, Sq});
  if (Status s = to_host(comm, local.lse, &local_lse); !s) return s;
  if (Status s = side_by_side(comm, local_lse, B, &whole_lse); !s) return s;
  *lse_rows = lse_columns(whole_lse.view(), my_rows);
  return Status::ok();
}

Status PlacedShard::place(Communicator& comm, const AttentionArgs& host_shard) {
  args_ = host_shard;
  buffers_.clear();
  if (comm.memory() == MemorySpace::host) return Status::ok();
  for (TensorView* v : {&args_.q, &args_.k, &args_.v, &args_.q_scales, &args_.k_scales,
                        &args_.v_scales, &args_.o, &args_.lse, &args_.k_mean}) {
    if (!v->given()) continue;
    Buffer b;
    if (Status st = Buffer::allocate(comm, v->bytes, &b); !st) return st;
    if (Status st = comm.copy_from_host(b.data(), v->data, v->bytes); !st) return st;
    v->data = b.data();
    buffers_.push_back(std::move(b));
  }
  return Status::ok();
}

Status PlacedShard::fetch_outputs(Communicator& comm, const AttentionArgs& host_shard) const {
  if (comm.memory() == MemorySpace::host) return Status::ok();
  if (Status st = comm.copy_to_host(host_shard.o.data, args_.o.data, args_.o.bytes); !st) return st;
  if (!args_.lse.given()) return Status::ok();
  return comm.copy_to_host(host_shard.lse.data, args_.lse.data, args_.lse.bytes);
}

}  // namespace mxattn::dist
