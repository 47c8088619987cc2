#include "core/ragged.h"

#include <cstdint>
#include <string>

#include "base/index.h"
#include "core/checks.h"

namespace mxattn::core {
namespace {

// Rows [first, first + count) of axis 0 of a view.
TensorView rows_of(const TensorView& v, int64_t first, int64_t count) {
  if (!v.given()) return v;
  TensorView out = v;
  const int64_t skipped_bytes = first * v.stride[0] * bits_of(v.dtype) / 8;
  out.data = static_cast<uint8_t*>(v.data) + skipped_bytes;
  out.bytes = v.bytes - skipped_bytes;
  out.shape[0] = count;
  return out;
}

// The view with a leading axis of size 1: a batch of one.
TensorView batch_of_one(const TensorView& v) {
  if (!v.given()) return v;
  TensorView out = v;
  out.rank = v.rank + 1;
  out.shape[0] = 1;
  out.stride[0] = 0;
  for (int i = 0; i < v.rank; ++i) {
    out.shape[i + 1] = v.shape[i];
    out.stride[i + 1] = v.stride[i];
  }
  return out;
}

int64_t cu_at(const TensorView& cu, int64_t b) {
  return base::read_i32(cu, base::offset_of(cu, b));
}

}  // namespace

Status split_ragged(const RaggedArgs& a, std::vector<SequenceArgs>* out) {
  if (Status st = check_given_rank("q", a.q, 3, "[total_q, Hq, Dqk]"); !st) return st;
  if (Status st = check_given_rank("o", a.o, 3, "[total_q, Hq, Dv]"); !st) return st;
  if (Status st = check_given_rank("cu_seqlens_q", a.cu_seqlens_q, 1, "[B + 1]"); !st) return st;
  const int64_t sequences = a.cu_seqlens_q.shape[0] - 1;
  if (sequences < 0) {
    return invalid("cu_seqlens_q must hold B + 1 >= 1 entries, found 0");
  }
  if (Status st =
          check_view("cu_seqlens_q", a.cu_seqlens_q, kI32, shape("[B + 1]", {sequences + 1}));
      !st) {
    return st;
  }
  if (Status st = check_view("seq_lens", a.seq_lens, kI32, shape("[B]", {sequences})); !st) {
    return st;
  }
  const int64_t total = a.q.shape[0];
  if (cu_at(a.cu_seqlens_q, 0) != 0) {
    return invalid("cu_seqlens_q[0] must be 0, found ", cu_at(a.cu_seqlens_q, 0));
  }
  for (int64_t b = 0; b < sequences; ++b) {
    if (cu_at(a.cu_seqlens_q, b + 1) < cu_at(a.cu_seqlens_q, b)) {
      return invalid("cu_seqlens_q must not decrease: cu_seqlens_q[", b + 1,
                     "] = ", cu_at(a.cu_seqlens_q, b + 1), " is below cu_seqlens_q[", b,
                     "] = ", cu_at(a.cu_seqlens_q, b));
    }
  }
  if (cu_at(a.cu_seqlens_q, sequences) != total) {
    return invalid("cu_seqlens_q[", sequences, "] must be total_q = ", total, " (q's rows), found ",
                   cu_at(a.cu_seqlens_q, sequences));
  }
  const int64_t heads_q = a.q.shape[1];
  if (a.o.shape[0] != total || a.o.shape[1] != heads_q) {
    return invalid("o must have shape [total_q, Hq, Dv] with total_q = ", total,
                   " and Hq = ", heads_q, ", found ", a.o.shape_string());
  }
  if (a.q_scales.given() && (a.q_scales.rank != 3 || a.q_scales.shape[0] != total)) {
    return invalid("q_scales must have shape [total_q, Hq, Dqk / 32] with total_q = ", total,
                   ", found ", a.q_scales.shape_string());
  }
  if (a.lse.given() && (a.lse.rank != 2 || a.lse.shape[0] != heads_q || a.lse.shape[1] != total)) {
    return invalid("lse must have shape [Hq, total_q] = [", heads_q, ", ", total, "], found ",
                   a.lse.shape_string());
  }
  // Per-sequence views of K, V and their metadata: dense caches hold one batch entry per
  // sequence, paged ones one block-table row.
  const bool paged = a.paged.given();
  if (!paged && a.k.given() && a.k.rank >= 1 && a.k.shape[0] != sequences) {
    return invalid("k must hold one batch entry per sequence (B = ", sequences, "), found shape ",
                   a.k.shape_string());
  }
  if (paged && a.paged.block_table.given() && a.paged.block_table.shape[0] != sequences) {
    return invalid("block_table must hold one row per sequence (B = ", sequences, "), found shape ",
                   a.paged.block_table.shape_string());
  }
  for (const auto& [name, view] :
       {std::pair{"prefix_offset", &a.prefix_offset}, std::pair{"k_mean", &a.k_mean}}) {
    if (view->given() && view->rank >= 1 && view->shape[0] != sequences) {
      return invalid(name, " must hold one entry per sequence (B = ", sequences, "), found shape ",
                     view->shape_string());
    }
  }

  out->clear();
  for (int64_t b = 0; b < sequences; ++b) {
    const int64_t first = cu_at(a.cu_seqlens_q, b);
    const int64_t rows = cu_at(a.cu_seqlens_q, b + 1) - first;
    if (rows == 0) continue;
    SequenceArgs s;
    s.b = b;
    AttentionArgs& x = s.args;
    x.q = batch_of_one(rows_of(a.q, first, rows));
    x.q_scales = batch_of_one(rows_of(a.q_scales, first, rows));
    x.o = batch_of_one(rows_of(a.o, first, rows));
    if (a.lse.given()) {
      // [Hq, total_q] -> sequence b's [1, Hq, rows]: the columns of its rows.
      x.lse = a.lse;
      x.lse.rank = 3;
      x.lse.shape[0] = 1;
      x.lse.shape[1] = heads_q;
      x.lse.shape[2] = rows;
      x.lse.stride[0] = 0;
      x.lse.stride[1] = a.lse.stride[0];
      x.lse.stride[2] = a.lse.stride[1];
      const int64_t skipped = first * a.lse.stride[1] * 4;
      x.lse.data = static_cast<uint8_t*>(a.lse.data) + skipped;
      x.lse.bytes = a.lse.bytes - skipped;
    }
    x.k = paged ? a.k : rows_of(a.k, b, 1);
    x.v = paged ? a.v : rows_of(a.v, b, 1);
    x.k_scales = paged ? a.k_scales : rows_of(a.k_scales, b, 1);
    x.v_scales = paged ? a.v_scales : rows_of(a.v_scales, b, 1);
    x.v_scale_axis = a.v_scale_axis;
    x.paged.page_size = a.paged.page_size;
    x.paged.block_table = rows_of(a.paged.block_table, b, 1);
    x.kv_len = rows_of(a.seq_lens, b, 1);
    x.causal = a.causal;
    x.prefix_offset = rows_of(a.prefix_offset, b, 1);
    x.window = a.window;
    x.scale = a.scale;
    x.k_mean = rows_of(a.k_mean, b, 1);
    x.split = a.split;
    out->push_back(s);
  }
  return Status::ok();
}

}  // namespace mxattn::core
