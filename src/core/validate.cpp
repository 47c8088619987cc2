// Argument checking at the API edge (spec §7). Each check returns the first failure, naming the
// argument, what was expected and what was found. Nothing is written (not even the Problem) until
// every argument has passed, and host-readable metadata is read only after its own view was
// checked.
#include "core/validate.h"

#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>

#include "base/text.h"
#include "core/checks.h"
#include "mxattn/mx.h"

namespace mxattn::core {
namespace {

using base::cat;
using base::need_verb;
using base::strides_string;

// --- attention -----------------------------------------------------------------------------------

// Q fixes B, Sq, Hq and Dqk; K fixes Hkv; V fixes Dv. The full shapes are checked afterwards.
Status read_dims(const AttentionArgs& a, Problem& p) {
  const struct {
    std::string_view name;
    const TensorView& view;
    std::string_view axes;
  } main_views[] = {
      {"Q", a.q, "[B, Sq, Hq, Dqk]"},
      {"K", a.k, a.paged.page_size > 0 ? "[num_pages, page_size, Hkv, Dqk]" : "[B, Sk, Hkv, Dqk]"},
      {"V", a.v, a.paged.page_size > 0 ? "[num_pages, page_size, Hkv, Dv]" : "[B, Sk, Hkv, Dv]"},
      {"O", a.o, "[B, Sq, Hq, Dv]"}};
  for (const auto& m : main_views) {
    if (Status st = check_given_rank(m.name, m.view, 4, m.axes); !st) return st;
    if (Status st = check_dims_nonnegative(m.name, m.view); !st) return st;
  }
  // Zero B or Sq is a valid problem with no work; a zero head count or head dim is not.
  p.batch = a.q.shape[0];
  p.seq_q = a.q.shape[1];
  p.heads_q = a.q.shape[2];
  p.dim_qk = a.q.shape[3];
  p.heads_kv = a.k.shape[2];
  p.dim_v = a.v.shape[3];
  if (p.heads_q < 1) return invalid("Q heads Hq (axis 2) must be >= 1, found ", p.heads_q);
  if (p.dim_qk < 1) return invalid("Q head dim Dqk (axis 3) must be >= 1, found ", p.dim_qk);
  if (p.heads_kv < 1) return invalid("K heads Hkv (axis 2) must be >= 1, found ", p.heads_kv);
  if (p.dim_v < 1) return invalid("V head dim Dv (axis 3) must be >= 1, found ", p.dim_v);
  if (p.heads_q % p.heads_kv != 0) {
    return invalid("Q heads Hq = ", p.heads_q,
                   " must be a multiple of the K/V heads Hkv = ", p.heads_kv,
                   " (grouped-query attention)");
  }
  p.group = p.heads_q / p.heads_kv;
  return Status::ok();
}

// Dense K/V, or pages [num_pages, page_size, Hkv, D] behind a block table: fixes seq_k.
Status check_kv_form(const AttentionArgs& a, Problem& p) {
  const PagedKv& paged = a.paged;
  if (paged.page_size < 0) {
    return invalid("page_size must be >= 0 (0: dense K/V), found ", paged.page_size);
  }
  if (paged.page_size == 0) {
    if (paged.block_table.given()) {
      return invalid(
          "block_table given but page_size is 0 (dense K/V); set page_size for a paged cache");
    }
    p.seq_k = a.k.shape[1];
    return Status::ok();
  }
  const TensorView& table = paged.block_table;
  if (Status st = check_view("block_table", table, kI32,
                             shape("[B, max_pages]", {p.batch, table.shape[1]}));
      !st) {
    return st;
  }
  p.paged = true;
  p.page_size = paged.page_size;
  p.max_pages = table.shape[1];
  p.num_pages = a.k.shape[0];
  if (__builtin_mul_overflow(p.max_pages, p.page_size, &p.seq_k)) {
    return invalid("the key length max_pages * page_size = ", p.max_pages, " * ", p.page_size,
                   " of block_table overflows 64-bit sizes");
  }
  return Status::ok();
}

Status check_qkvo(const AttentionArgs& a, const Problem& p) {
  const int64_t kv_outer = p.paged ? p.num_pages : p.batch;
  const int64_t kv_inner = p.paged ? p.page_size : p.seq_k;
  const std::string_view k_axes =
      p.paged ? "[num_pages, page_size, Hkv, Dqk]" : "[B, Sk, Hkv, Dqk]";
  const std::string_view v_axes = p.paged ? "[num_pages, page_size, Hkv, Dv]" : "[B, Sk, Hkv, Dv]";
  if (Status st = check_view("Q", a.q, kAttentionInput,
                             shape("[B, Sq, Hq, Dqk]", {p.batch, p.seq_q, p.heads_q, p.dim_qk}));
      !st) {
    return st;
  }
  if (Status st = check_view("K", a.k, kAttentionInput,
                             shape(k_axes, {kv_outer, kv_inner, p.heads_kv, p.dim_qk}));
      !st) {
    return st;
  }
  if (Status st = check_view("V", a.v, kAttentionInput,
                             shape(v_axes, {kv_outer, kv_inner, p.heads_kv, p.dim_v}));
      !st) {
    return st;
  }
  return check_view("O", a.o, kPlainFloat,
                    shape("[B, Sq, Hq, Dv]", {p.batch, p.seq_q, p.heads_q, p.dim_v}));
}

// MX blocks along a head dim need whole 32-element blocks.
Status check_block_dim(std::string_view name, DType t, std::string_view dim_name, int64_t dim) {
  if (dim % kMxBlock == 0) return Status::ok();
  return invalid(name, " is ", name_of(t), " (MX, blocks of ", kMxBlock,
                 " along the head dim): ", dim_name, " must be a multiple of ", kMxBlock,
                 ", found ", dim);
}

// Scales belong to MX inputs only, and every MX input has them, of exactly `want`'s shape.
Status check_scales(std::string_view data_name, const TensorView& data,
                    std::string_view scales_name, const TensorView& scales, const Shape& want) {
  if (!is_mx(data.dtype)) {
    if (!scales.given()) return Status::ok();
    return invalid(scales_name, " given but ", data_name, " is ", name_of(data.dtype),
                   ", not an MX element type");
  }
  if (!scales.given()) {
    return invalid(scales_name, " are required because ", data_name, " is ", name_of(data.dtype),
                   " (MX): expected e8m0 ", want.axes, " = ", shape_string(want));
  }
  return check_view(scales_name, scales, kE8m0, want);
}

// MX blocks run along the head dims of Q and K, and of V unless its scales run along the keys; a
// paged V with blocks along the keys needs whole blocks per page, so no block straddles two pages.
Status check_mx_dims(const AttentionArgs& a, const Problem& p) {
  if (a.v_scale_axis != VScaleAxis::head_dim && a.v_scale_axis != VScaleAxis::keys) {
    return invalid("v_scale_axis must be head_dim or keys, found ", int(a.v_scale_axis));
  }
  if (is_mx(a.q.dtype)) {
    if (Status st = check_block_dim("Q", a.q.dtype, "Dqk", p.dim_qk); !st) return st;
  }
  if (is_mx(a.k.dtype)) {
    if (Status st = check_block_dim("K", a.k.dtype, "Dqk", p.dim_qk); !st) return st;
  }
  if (!is_mx(a.v.dtype)) return Status::ok();
  if (a.v_scale_axis == VScaleAxis::head_dim) return check_block_dim("V", a.v.dtype, "Dv", p.dim_v);
  if (p.paged && p.page_size % kMxBlock != 0) {
    return invalid("page_size must be a multiple of ", kMxBlock, " when V is ", name_of(a.v.dtype),
                   " with scales along the keys, found ", p.page_size);
  }
  return Status::ok();
}

Status check_mx_scales(const AttentionArgs& a, const Problem& p) {
  const int64_t kv_outer = p.paged ? p.num_pages : p.batch;
  const int64_t kv_inner = p.paged ? p.page_size : p.seq_k;
  if (Status st = check_scales(
          "Q", a.q, "Q scales", a.q_scales,
          shape("[B, Sq, Hq, Dqk/32]", {p.batch, p.seq_q, p.heads_q, p.dim_qk / kMxBlock}));
      !st) {
    return st;
  }
  if (Status st = check_scales(
          "K", a.k, "K scales", a.k_scales,
          shape(p.paged ? "[num_pages, page_size, Hkv, Dqk/32]" : "[B, Sk, Hkv, Dqk/32]",
                {kv_outer, kv_inner, p.heads_kv, p.dim_qk / kMxBlock}));
      !st) {
    return st;
  }
  if (a.v_scale_axis == VScaleAxis::head_dim) {
    return check_scales(
        "V", a.v, "V scales", a.v_scales,
        shape(p.paged ? "[num_pages, page_size, Hkv, Dv/32]" : "[B, Sk, Hkv, Dv/32]",
              {kv_outer, kv_inner, p.heads_kv, p.dim_v / kMxBlock}));
  }
  if (p.paged) {
    return check_scales("V", a.v, "V scales", a.v_scales,
                        shape("[num_pages, Hkv, page_size/32, Dv]",
                              {p.num_pages, p.heads_kv, p.page_size / kMxBlock, p.dim_v}));
  }
  return check_scales("V", a.v, "V scales", a.v_scales,
                      shape("[B, Hkv, ceil(Sk/32), Dv]",
                            {p.batch, p.heads_kv, blocks_of(p.seq_k, kMxBlock), p.dim_v}));
}

Status check_masks(const AttentionArgs& a, const Problem& p) {
  switch (a.causal) {
    case Causal::none:
    case Causal::top_left:
    case Causal::bottom_right:
    case Causal::prefix:
      break;
    default:
      return invalid("causal must be none, top_left, bottom_right or prefix, found ",
                     int(a.causal));
  }
  if (a.scale && !std::isfinite(*a.scale)) return invalid("scale must be finite, found ", *a.scale);
  if (Status st = check_optional_view("kv_len", a.kv_len, kI32, shape("[B]", {p.batch})); !st) {
    return st;
  }
  if (a.kv_len.given()) {
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t len = read_i32(a.kv_len, offset_of(a.kv_len, b));
      if (len < 0 || len > p.seq_k) {
        return invalid("kv_len[", b, "] must be in [0, ", p.seq_k, "] (Sk), found ", len);
      }
    }
  }
  if (a.causal != Causal::prefix) {
    if (!a.prefix_offset.given()) return Status::ok();
    return invalid("prefix_offset given but causal is not prefix");
  }
  if (!a.prefix_offset.given()) {
    return invalid("prefix_offset is required with causal prefix: expected i32 (int32) [B] = [",
                   p.batch, "]");
  }
  return check_view("prefix_offset", a.prefix_offset, kI32, shape("[B]", {p.batch}));
}

// Every page covering a sequence's valid keys [0, kv_len[b]) is read, so it must exist; entries
// past kv_len are never read and may hold anything.
Status check_block_table(const Problem& p) {
  if (!p.paged) return Status::ok();
  const TensorView& table = p.args.paged.block_table;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t pages_read = blocks_of(p.kv_len(b), p.page_size);
    for (int64_t i = 0; i < pages_read; ++i) {
      const int64_t page = read_i32(table, offset_of(table, b, i));
      if (page < 0 || page >= p.num_pages) {
        return invalid("block_table[", b, ", ", i, "] must be a page in [0, ", p.num_pages,
                       ") (num_pages of K and V), found ", page, "; it holds keys [",
                       i * p.page_size, ", ", (i + 1) * p.page_size, ") of batch ", b,
                       ", below kv_len ", p.kv_len(b));
      }
    }
  }
  return Status::ok();
}

bool sparse_block_ok(int64_t n) {
  return n >= 16 && n <= 256 && (n & (n - 1)) == 0;
}

// One (b, h) of the BSR layout: row_ptr starts at 0, never decreases and stays within col_idx; each
// row's key blocks are strictly increasing and exist.
Status check_sparse_rows(const Problem& p, int64_t b, int64_t h) {
  const TensorView& rp = p.args.sparse.row_ptr;
  const TensorView& ci = p.args.sparse.col_idx;
  const int64_t nnz_max = ci.shape[2];
  const int64_t first = read_i32(rp, offset_of(rp, b, h, 0));
  if (first != 0) {
    return invalid("sparse row_ptr must start at 0 for (b, h) = (", b, ", ", h, "), found ", first);
  }
  for (int64_t qb = 0; qb < p.q_blocks; ++qb) {
    const int64_t begin = read_i32(rp, offset_of(rp, b, h, qb));
    const int64_t end = read_i32(rp, offset_of(rp, b, h, qb + 1));
    if (end < begin) {
      return invalid("sparse row_ptr must be non-decreasing: at (b, h, query block) = (", b, ", ",
                     h, ", ", qb, ") it goes from ", begin, " to ", end);
    }
    if (end > nnz_max) {
      return invalid("sparse row_ptr at (b, h, query block) = (", b, ", ", h, ", ", qb,
                     ") ends at ", end, ", past the ", nnz_max, " entries of sparse col_idx");
    }
    int64_t previous = -1;
    for (int64_t e = begin; e < end; ++e) {
      const int64_t col = read_i32(ci, offset_of(ci, b, h, e));
      if (col < 0 || col >= p.k_blocks) {
        return invalid("sparse col_idx at (b, h, query block) = (", b, ", ", h, ", ", qb,
                       ") must list key blocks in [0, ", p.k_blocks,
                       ") (ceil(Sk / block_k)), found ", col);
      }
      if (col <= previous) {
        return invalid(
            "sparse col_idx must be strictly increasing within a row: at (b, h, query block) = (",
            b, ", ", h, ", ", qb, ") key block ", col, " follows ", previous);
      }
      previous = col;
    }
  }
  return Status::ok();
}

Status check_sparse(const AttentionArgs& a, Problem& p) {
  const SparseLayout& s = a.sparse;
  if (!s.given()) {
    if (!s.col_idx.given()) return Status::ok();
    return invalid("sparse col_idx given without sparse row_ptr");
  }
  if (!sparse_block_ok(s.block_q)) {
    return invalid("block_q must be a power of two in [16, 256], found ", s.block_q);
  }
  if (!sparse_block_ok(s.block_k)) {
    return invalid("block_k must be a power of two in [16, 256], found ", s.block_k);
  }
  p.q_blocks = blocks_of(p.seq_q, s.block_q);
  p.k_blocks = blocks_of(p.seq_k, s.block_k);
  // Axis size 1 broadcasts the layout over the batch or the heads.
  const int64_t bx = s.row_ptr.shape[0] == 1 ? 1 : p.batch;
  const int64_t hx = s.row_ptr.shape[1] == 1 ? 1 : p.heads_q;
  if (Status st = check_view("sparse row_ptr", s.row_ptr, kI32,
                             shape("[Bx, Hx, ceil(Sq / block_q) + 1] (Bx 1 or B, Hx 1 or Hq)",
                                   {bx, hx, p.q_blocks + 1}));
      !st) {
    return st;
  }
  if (Status st = check_view("sparse col_idx", s.col_idx, kI32,
                             shape("[Bx, Hx, nnz_max]", {bx, hx, s.col_idx.shape[2]}));
      !st) {
    return st;
  }
  // Engines read a row's key blocks through one pointer.
  if (s.col_idx.stride[2] != 1) {
    return invalid("sparse col_idx must have stride 1 on its last axis, found strides ",
                   strides_string(s.col_idx));
  }
  p.sparse = true;
  for (int64_t b = 0; b < bx; ++b) {
    for (int64_t h = 0; h < hx; ++h) {
      if (Status st = check_sparse_rows(p, b, h); !st) return st;
    }
  }
  return Status::ok();
}

Status check_split(const SplitOptions& o, const Problem& p) {
  if (o.split_kv < 0 || o.split_kv > 1024) {
    return invalid("split_kv must be in [0, 1024] (0: auto), found ", o.split_kv);
  }
  if (o.tile_m < 0) {
    return invalid("tile_m must be >= 0 (0: the engine's choice), found ", o.tile_m);
  }
  if (o.tile_n < 0) {
    return invalid("tile_n must be >= 0 (0: the engine's choice), found ", o.tile_n);
  }
  if (o.auto_target < 0) {
    return invalid("auto_target must be >= 0 (0: the engine's choice), found ", o.auto_target);
  }
  int64_t slots = -1;
  if (o.partial_o.given()) {
    slots = o.partial_o.shape[0];
    if (Status st =
            check_view("partial_o", o.partial_o, kF32,
                       shape("[S, B, Sq, Hq, Dv]", {slots, p.batch, p.seq_q, p.heads_q, p.dim_v}));
        !st) {
      return st;
    }
  }
  if (o.partial_lse.given()) {
    if (slots < 0) slots = o.partial_lse.shape[0];
    if (Status st = check_view("partial_lse", o.partial_lse, kF32,
                               shape("[S, B, Hq, Sq]", {slots, p.batch, p.heads_q, p.seq_q}));
        !st) {
      return st;
    }
  }
  if ((o.partial_o.given() || o.partial_lse.given()) && slots < 1) {
    return invalid(o.partial_o.given() ? "partial_o" : "partial_lse",
                   " must hold at least 1 split (S, axis 0), found ", slots);
  }
  return check_optional_view("counts", o.counts, kI32,
                             shape("[B, Hq, Sq]", {p.batch, p.heads_q, p.seq_q}));
}

}  // namespace

Status validate_problem(const AttentionArgs& args, Problem* out) {
  Problem p;
  p.args = args;
  if (Status st = read_dims(args, p); !st) return st;
  if (Status st = check_kv_form(args, p); !st) return st;
  if (Status st = check_mx_dims(args, p); !st) return st;
  if (Status st = check_qkvo(args, p); !st) return st;
  if (Status st = check_mx_scales(args, p); !st) return st;
  if (Status st = check_masks(args, p); !st) return st;
  if (Status st = check_block_table(p); !st) return st;
  if (Status st = check_sparse(args, p); !st) return st;
  if (Status st = check_optional_view("LSE", args.lse, kF32,
                                      shape("[B, Hq, Sq]", {p.batch, p.heads_q, p.seq_q}));
      !st) {
    return st;
  }
  if (Status st = check_optional_view("k_mean", args.k_mean, kF32,
                                      shape("[B, Hkv, Dqk]", {p.batch, p.heads_kv, p.dim_qk}));
      !st) {
    return st;
  }
  if (Status st = check_split(args.split, p); !st) return st;
  p.scale = args.scale ? *args.scale : float(1.0 / std::sqrt(double(p.dim_qk)));
  // Any window W >= seq_k shows every key below a row's upper bound, exactly as W = seq_k does; the
  // clamp keeps the engines' hi - W from overflowing.
  if (p.args.window > p.seq_k) p.args.window = p.seq_k;
  *out = p;
  return Status::ok();
}

Status validate_partial_slots(const AttentionArgs& args, int64_t slots) {
  const SplitOptions& o = args.split;
  const TensorView& partial = o.partial_o.given() ? o.partial_o : o.partial_lse;
  if (!partial.given() || partial.shape[0] >= slots) return Status::ok();
  return invalid(o.partial_o.given() ? "partial_o" : "partial_lse", " holds ", partial.shape[0],
                 " splits (S, axis 0) but the plan needs ", slots, " slots");
}

Status validate_combine(const CombineArgs& args, bool counts_readable) {
  const TensorView& po = args.partial_o;
  if (Status st = check_given_rank("partial_o", po, 5, "[S, B, Sq, Hq, Dv]"); !st) return st;
  const int64_t slots = po.shape[0], batch = po.shape[1], seq_q = po.shape[2], heads = po.shape[3],
                dim_v = po.shape[4];
  if (Status st = check_view("partial_o", po, kPlainFloat,
                             shape("[S, B, Sq, Hq, Dv]", {slots, batch, seq_q, heads, dim_v}));
      !st) {
    return st;
  }
  if (slots < 1) return invalid("partial_o must hold at least 1 split (S, axis 0), found ", slots);
  if (Status st = check_view("partial_lse", args.partial_lse, kF32,
                             shape("[S, B, Hq, Sq]", {slots, batch, heads, seq_q}));
      !st) {
    return st;
  }
  if (Status st =
          check_view("counts", args.counts, kI32, shape("[B, Hq, Sq]", {batch, heads, seq_q}));
      !st) {
    return st;
  }
  if (Status st = check_view("O", args.o, kPlainFloat,
                             shape("[B, Sq, Hq, Dv]", {batch, seq_q, heads, dim_v}));
      !st) {
    return st;
  }
  if (Status st =
          check_optional_view("LSE", args.lse, kF32, shape("[B, Hq, Sq]", {batch, heads, seq_q}));
      !st) {
    return st;
  }
  if (!counts_readable) return Status::ok();
  const TensorView& counts = args.counts;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < seq_q; ++i) {
        const int64_t c = read_i32(counts, offset_of(counts, b, h, i));
        if (c < 0 || c > slots) {
          return invalid("counts[", b, ", ", h, ", ", i, "] must be in [0, ", slots,
                         "] (S), found ", c);
        }
      }
    }
  }
  return Status::ok();
}

Status validate_merge(const MergeArgs& a) {
  if (Status st = check_given_rank("o_a", a.o_a, 3, "[N, H, D]"); !st) return st;
  const int64_t rows = a.o_a.shape[0], heads = a.o_a.shape[1], dim = a.o_a.shape[2];
  const Shape o_shape = shape("[N, H, D]", {rows, heads, dim});
  const Shape lse_shape = shape("[N, H]", {rows, heads});
  for (const auto& [name, view] : {std::pair{"o_a", &a.o_a}, {"o_b", &a.o_b}, {"o", &a.o}}) {
    if (Status st = check_view(name, *view, kPlainFloat, o_shape); !st) return st;
  }
  for (const auto& [name, view] : {std::pair{"lse_a", &a.lse_a}, {"lse_b", &a.lse_b}}) {
    if (Status st = check_view(name, *view, kF32, lse_shape); !st) return st;
  }
  return check_optional_view("lse", a.lse, kF32, lse_shape);
}

}  // namespace mxattn::core
