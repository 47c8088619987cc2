// The batch plan (spec §12) on the CPU engines: the shape is checked once; each run checks its
// tensors against the shape and its metadata against the capacities, then is the ragged call
// (spec §10) over its tensors.
#include "mxattn/batch.h"

#include <string>

#include "base/index.h"
#include "base/text.h"

namespace mxattn {
namespace {

using base::cat;

template <class... Parts>
Status invalid(const Parts&... parts) {
  return Status::invalid(cat(parts...));
}

// A view of the run that must carry the planned element type, and heads and head dim on its last
// two axes (where `heads` >= 0).
Status check_planned(const char* name, const TensorView& v, DType type, int64_t heads,
                     int64_t dim) {
  if (!v.given()) return invalid(name, " is required by the plan but was not given");
  if (v.dtype != type) {
    return invalid(name, " must be ", name_of(type), " as planned, found ", name_of(v.dtype));
  }
  if (heads >= 0 && (v.rank < 2 || v.shape[v.rank - 2] != heads || v.shape[v.rank - 1] != dim)) {
    return invalid(name, " must end in [", heads, ", ", dim, "] (heads, head dim) as planned, ",
                   "found ", v.shape_string());
  }
  return Status::ok();
}

}  // namespace

Status BatchPlan::plan(const BatchShape& s, const RunOptions& options, BatchPlan* out) {
  if (options.engine == Engine::cuda) {
    return Status::unsupported("engine: this version's batch plan runs the CPU engines");
  }
  const struct {
    const char* name;
    int64_t value;
    int64_t least;
  } sizes[] = {{"max_sequences", s.max_sequences, 0},
               {"max_query_rows", s.max_query_rows, 0},
               {"max_kv_len", s.max_kv_len, 0},
               {"page_size", s.page_size, 0},
               {"num_pages", s.num_pages, 0},
               {"heads_q", s.heads_q, 1},
               {"heads_kv", s.heads_kv, 1},
               {"dim_qk", s.dim_qk, 1},
               {"dim_v", s.dim_v, 1}};
  for (const auto& size : sizes) {
    if (size.value < size.least) {
      return invalid("shape: ", size.name, " must be >= ", size.least, ", found ", size.value);
    }
  }
  if (s.heads_q % s.heads_kv != 0) {
    return invalid("shape: heads_q (", s.heads_q, ") must be a multiple of heads_kv (", s.heads_kv,
                   ")");
  }
  if (s.page_size > 0 && s.num_pages == 0 && s.max_kv_len > 0) {
    return invalid("shape: a paged plan needs num_pages >= 1");
  }
  if (!is_plain_float(s.o_type)) {
    return invalid("shape: o_type must be f32, f16 or bf16, found ", name_of(s.o_type));
  }
  if (s.split.partial_o.given() || s.split.partial_lse.given() || s.split.counts.given()) {
    return invalid("shape: split: a batch plan takes no partial outputs");
  }
  out->shape_ = s;
  out->options_ = options;
  out->ready_ = true;
  return Status::ok();
}

Status BatchPlan::run(const BatchRun& r) const {
  if (!ready_) return invalid("plan: run needs a plan built by BatchPlan::plan");
  const BatchShape& s = shape_;
  if (Status st = check_planned("q", r.q, s.q_type, s.heads_q, s.dim_qk); !st) return st;
  if (Status st = check_planned("k", r.k, s.k_type, s.heads_kv, s.dim_qk); !st) return st;
  if (Status st = check_planned("v", r.v, s.v_type, s.heads_kv, s.dim_v); !st) return st;
  if (Status st = check_planned("o", r.o, s.o_type, s.heads_q, s.dim_v); !st) return st;
  if (s.lse && !r.lse.given()) return invalid("lse is required by the plan but was not given");
  if (!s.lse && r.lse.given()) return invalid("lse is given but the plan writes none");
  if (!r.cu_seqlens_q.given() || r.cu_seqlens_q.rank != 1 || r.cu_seqlens_q.shape[0] < 1) {
    return invalid("cu_seqlens_q must be int32 [B + 1] with B + 1 >= 1");
  }
  const int64_t sequences = r.cu_seqlens_q.shape[0] - 1;
  if (sequences > s.max_sequences) {
    return invalid("cu_seqlens_q holds ", sequences, " sequences, past the plan's max_sequences (",
                   s.max_sequences, ")");
  }
  if (r.q.shape[0] > s.max_query_rows) {
    return invalid("q holds ", r.q.shape[0], " rows, past the plan's max_query_rows (",
                   s.max_query_rows, ")");
  }
  if (r.seq_lens.given() && r.seq_lens.dtype == DType::i32 && r.seq_lens.rank == 1) {
    for (int64_t b = 0; b < r.seq_lens.shape[0]; ++b) {
      const int64_t len = base::read_i32(r.seq_lens, base::offset_of(r.seq_lens, b));
      if (len > s.max_kv_len) {
        return invalid("seq_lens[", b, "] = ", len, " is past the plan's max_kv_len (",
                       s.max_kv_len, ")");
      }
    }
  }
  const bool paged = s.page_size > 0;
  if (paged && r.k.rank == 4 && r.k.shape[0] != s.num_pages) {
    return invalid("k must hold the plan's ", s.num_pages, " pages, found ", r.k.shape_string());
  }
  RaggedArgs a;
  a.q = r.q;
  a.q_scales = r.q_scales;
  a.cu_seqlens_q = r.cu_seqlens_q;
  a.seq_lens = r.seq_lens;
  // Dense caches hold max_sequences entries: a run of B sequences reads the first B.
  const auto first_rows = [&](TensorView v) {
    if (!paged && v.given() && v.rank >= 1 && v.shape[0] > sequences) v.shape[0] = sequences;
    return v;
  };
  a.k = first_rows(r.k);
  a.v = first_rows(r.v);
  a.k_scales = first_rows(r.k_scales);
  a.v_scales = first_rows(r.v_scales);
  a.v_scale_axis = s.v_scale_axis;
  if (paged) {
    a.paged.page_size = s.page_size;
    a.paged.block_table = r.block_table;
  }
  a.o = r.o;
  a.lse = r.lse;
  a.causal = s.causal;
  a.window = s.window;
  a.scale = s.scale;
  a.split = s.split;
  return attention(a, options_);
}

}  // namespace mxattn
