// The validated problem: what engines receive. Only core/validate.cpp builds one, after checking
// every argument, so engines never re-check and never fail on their inputs.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/index.h"
#include "core/split_plan.h"
#include "core/visibility.h"
#include "mxattn/attention.h"

namespace mxattn::core {

using base::offset_of;
using base::read_i32;

struct Problem {
  AttentionArgs args;  // the checked views and options, as given

  int64_t batch = 0;
  int64_t seq_q = 0;
  int64_t seq_k = 0;  // logical keys per sequence (paged: max_pages * page_size)
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t group = 1;  // heads_q / heads_kv
  int64_t dim_qk = 0;
  int64_t dim_v = 0;
  float scale = 0.0f;  // resolved softmax scale

  bool paged = false;
  int64_t page_size = 0;
  int64_t max_pages = 0;  // block_table columns
  int64_t num_pages = 0;  // pages in the K/V pools

  bool sparse = false;
  int64_t q_blocks = 0;  // ceil(seq_q / block_q)
  int64_t k_blocks = 0;  // ceil(seq_k / block_k)

  int64_t kv_len(int64_t b) const {
    return args.kv_len.given() ? read_i32(args.kv_len, offset_of(args.kv_len, b)) : seq_k;
  }

  int64_t causal_offset(int64_t b) const {
    switch (args.causal) {
      case Causal::bottom_right:
        return kv_len(b) - seq_q;
      case Causal::prefix:
        return read_i32(args.prefix_offset, offset_of(args.prefix_offset, b));
      default:
        return 0;
    }
  }

  Visibility visibility(int64_t b) const {
    Visibility v;
    v.last = kv_len(b) - 1;
    v.causal = args.causal != Causal::none;
    v.offset = causal_offset(b);
    v.window = args.window;
    return v;
  }

  // Page holding key j of batch b and the slot in it (dense: page = b, slot = j).
  int64_t kv_page(int64_t b, int64_t j) const {
    if (!paged) return b;
    return read_i32(args.paged.block_table, offset_of(args.paged.block_table, b, j / page_size));
  }
  int64_t kv_slot(int64_t j) const { return paged ? j % page_size : j; }

  // The sparse row of query block qb for (b, h): its listed key blocks, sorted.
  struct SparseRow {
    const int32_t* cols = nullptr;  // contiguous when col_idx's last stride is 1 (validated)
    int64_t count = 0;
  };
  SparseRow sparse_row(int64_t b, int64_t h, int64_t qb) const {
    const TensorView& rp = args.sparse.row_ptr;
    const TensorView& ci = args.sparse.col_idx;
    const int64_t bb = rp.shape[0] == 1 ? 0 : b;
    const int64_t hh = rp.shape[1] == 1 ? 0 : h;
    const int64_t first = read_i32(rp, offset_of(rp, bb, hh, qb));
    const int64_t last = read_i32(rp, offset_of(rp, bb, hh, qb + 1));
    const int32_t* base = static_cast<const int32_t*>(ci.data) + offset_of(ci, bb, hh, first);
    return {base, last - first};
  }
};

// Checks every argument (spec §7) and fills `out`. Host-readable metadata (kv_len, prefix offsets,
// block table, sparse layout) is checked element by element.
Status validate_problem(const AttentionArgs& args, Problem* out);

}  // namespace mxattn::core
