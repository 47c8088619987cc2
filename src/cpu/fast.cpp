// The fast CPU engine: flash-style online softmax over the SPEC 3 partition of plan.h, one work
// item per (batch, KV head or query head, query tile, split, piece), run on OpenMP threads. The
// query heads of a GQA group are packed into one tile, so each K/V tile is dequantized once and used
// by all of them. The arithmetic lives in the kernel sets of fast_kernels.h; this file gathers rows,
// plans the work and writes the results.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "core/combine.h"
#include "core/plan.h"
#include "cpu/engines.h"
#include "cpu/fast.h"
#include "cpu/partials.h"
#include "cpu/rows.h"
#include "mx/formats.h"

namespace mxattn::cpu {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;
// Packed rows and head dims are padded to the widest vector, 16 f32 lanes.
constexpr int64_t kPad = 16;
// Up to this many packed rows use the kernel with vectors along the head dim (decode).
constexpr int64_t kFewRows = 8;
// A split's key tiles are cut into pieces of at most this many, each its own work item, merged
// afterwards: one long sequence then keeps every thread busy. The cut depends only on the tile's
// own key count, so results do not depend on the batch or the thread count.
constexpr int64_t kPieceTiles = 32;

int64_t round_up(int64_t x, int64_t m) { return core::ceil_div(x, m) * m; }

const FastKernels& kernels_for(SimdIsa isa) {
  switch (isa) {
#if defined(MXATTN_CPU_X86)
    case SimdIsa::avx512:
      return fast_kernels_avx512();
    case SimdIsa::avx2:
      return fast_kernels_avx2();
#endif
    default:
      return fast_kernels_portable();
  }
}

// f32 scratch aligned to a cache line.
struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using Floats = std::unique_ptr<float[], AlignedDelete>;
Floats zeroed_floats(int64_t n) {
  float* p = static_cast<float*>(::operator new[](size_t(n) * sizeof(float), std::align_val_t(64)));
  std::fill(p, p + n, 0.0f);
  return Floats(p);
}

// One split of one packed query tile: its key-tile positions [first, first + count) and the piece
// of the split it is (pieces > 1: its result goes to the piece buffer at piece_slot).
struct WorkItem {
  int64_t tile = 0;  // index into Plan::tiles
  int64_t split = 0;
  int64_t first = 0;
  int64_t count = 0;
  int64_t piece = 0;
  int64_t pieces = 1;
  int64_t piece_slot = 0;
};

// A split run as several pieces: merged into one result after the items.
struct PieceGroup {
  int64_t tile = 0;
  int64_t split = 0;
  int64_t pieces = 0;
  int64_t first_slot = 0;
};

struct PackedTile {
  core::QueryTile q;  // the plan's tile of the first packed head
  int64_t kv_head = 0;
  int64_t heads = 1;  // packed query heads q.h, q.h + 1, ...
  int64_t rows() const { return heads * (q.row_last - q.row_first + 1); }
};

struct Plan {
  std::vector<PackedTile> tiles;
  std::vector<WorkItem> items;
  std::vector<PieceGroup> piece_groups;
  int64_t piece_slots = 0;
  int64_t max_rows = 0;
  bool partials = false;  // results go through partials and the combine
};

// GQA packing needs every head of the group to have the same key tiles: always true dense, and
// with a sparse layout broadcast over heads.
int64_t packed_heads(const core::Problem& p) {
  if (p.sparse && p.args.sparse.row_ptr.shape[1] != 1) return 1;
  return p.group;
}

Plan make_plan(const core::Problem& p, const core::SplitParams& split) {
  Plan plan;
  const int64_t pack = packed_heads(p);
  const int64_t q_tiles = core::query_tiles_per_head(p, split);
  plan.partials = p.args.split.partial_o.given() || p.args.split.partial_lse.given() ||
                  p.args.split.counts.given();
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; h += pack) {
      for (int64_t t = 0; t < q_tiles; ++t) {
        PackedTile tile{core::query_tile(p, split, b, h, t), h / p.group, pack};
        plan.partials = plan.partials || tile.q.splits > 1;
        plan.max_rows = std::max(plan.max_rows, tile.rows());
        plan.tiles.push_back(tile);
      }
    }
  }
  for (int64_t ti = 0; ti < int64_t(plan.tiles.size()); ++ti) {
    const core::QueryTile& q = plan.tiles[size_t(ti)].q;
    for (int64_t s = 0; s < q.count; ++s) {
      const core::TileRun run = core::split_tiles(q.run, q.splits, s);
      const int64_t pieces = core::ceil_div(run.count, kPieceTiles);
      const int64_t per_piece = core::ceil_div(run.count, pieces);
      if (pieces > 1) plan.piece_groups.push_back({ti, s, pieces, plan.piece_slots});
      for (int64_t k = 0; k < pieces; ++k) {
        const int64_t first = run.begin + k * per_piece;
        const int64_t count = std::min(per_piece, run.begin + run.count - first);
        plan.items.push_back({ti, s, first, count, k, pieces, plan.piece_slots + k});
      }
      if (pieces > 1) plan.piece_slots += pieces;
    }
  }
  // Longest first, so the last items to finish are short ones.
  std::stable_sort(plan.items.begin(), plan.items.end(),
                   [&](const WorkItem& a, const WorkItem& b) {
                     return a.count * plan.tiles[size_t(a.tile)].rows() >
                            b.count * plan.tiles[size_t(b.tile)].rows();
                   });
  return plan;
}

// How the K or V rows of one kv head read, and where each key's row starts.
class RowGather {
 public:
  RowGather(const core::Problem& p, bool values, const float* scale_values)
      : p_(p), values_(values) {
    const TensorView& v = values ? p.args.v : p.args.k;
    view_ = &v;
    scales_ = values ? &p.args.v_scales : &p.args.k_scales;
    format_.width = values ? p.dim_v : p.dim_qk;
    format_.elem_stride = v.stride[3];
    format_.scale_values = scale_values;
    scales_along_keys_ = values && p.args.v_scale_axis == VScaleAxis::keys;
    format_.scale_span = scales_along_keys_ ? 1 : 32;
    format_.scale_step = scales_->given() ? scales_->stride[3] : 0;
    switch (v.dtype) {
      case DType::f16:
        format_.elem = RowElem::f16;
        break;
      case DType::bf16:
        format_.elem = RowElem::bf16;
        break;
      case DType::e4m3:
        format_.elem = RowElem::e4m3;
        break;
      case DType::e5m2:
        format_.elem = RowElem::e5m2;
        break;
      default:
        format_.elem = RowElem::f32;
        kernel_decodes_ = v.dtype == DType::f32;
    }
  }

  // Rows of keys [first, first + count) of (b, hk) into dst (row stride dst_stride), as f32.
  void gather(const FastKernels& kernels, int64_t b, int64_t hk, int64_t first, int64_t count,
              RowSource* sources, float* dst, int64_t dst_stride) const {
    if (!kernel_decodes_) {
      for (int64_t k = 0; k < count; ++k) {
        float* row = dst + k * dst_stride;
        if (values_) {
          load_v_row(p_, b, first + k, hk, row);
        } else {
          load_k_row(p_, b, first + k, hk, row);
        }
      }
      return;
    }
    const uint8_t* data = static_cast<const uint8_t*>(view_->data);
    const uint8_t* scales = static_cast<const uint8_t*>(scales_->data);
    const int64_t elem_bytes = bits_of(view_->dtype) / 8;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t j = first + k;
      const int64_t page = p_.kv_page(b, j), slot = p_.kv_slot(j);
      sources[k].data = data + core::offset_of(*view_, page, slot, hk, 0) * elem_bytes;
      if (scales) {
        sources[k].scales = scales + (scales_along_keys_
                                          ? core::offset_of(*scales_, page, hk, slot / 32, 0)
                                          : core::offset_of(*scales_, page, slot, hk, 0));
      }
    }
    kernels.convert_rows(format_, sources, count, dst, dst_stride);
  }

  // Asks for the rows of keys [first, first + count) ahead of their gather. Rows of one head sit
  // a whole token apart (often a page or more), where the hardware prefetchers stop.
  void prefetch(int64_t b, int64_t hk, int64_t first, int64_t count) const {
    const uint8_t* data = static_cast<const uint8_t*>(view_->data);
    const uint8_t* scales = static_cast<const uint8_t*>(scales_->data);
    const int64_t row_bytes = format_.width * bits_of(view_->dtype) / 8;
    for (int64_t j = first; j < first + count; ++j) {
      const int64_t page = p_.kv_page(b, j), slot = p_.kv_slot(j);
      const uint8_t* row = data + core::offset_of(*view_, page, slot, hk, 0) * bits_of(view_->dtype) / 8;
      for (int64_t line = 0; line < row_bytes; line += 64) __builtin_prefetch(row + line, 0, 2);
      if (scales && !scales_along_keys_) {
        __builtin_prefetch(scales + core::offset_of(*scales_, page, slot, hk, 0), 0, 2);
      }
    }
  }

 private:
  const core::Problem& p_;
  bool values_ = false;
  const TensorView* view_ = nullptr;
  const TensorView* scales_ = nullptr;
  bool scales_along_keys_ = false;
  // f32, f16, bf16, E4M3 and E5M2 rows are decoded by the kernels; FP6 and FP4 through rows.h.
  bool kernel_decodes_ = true;
  RowFormat format_;
};

// Per-thread scratch, sized for the largest tile of the plan.
struct Scratch {
  Scratch(int64_t rows_padded, int64_t tile_n, int64_t dim_qk_padded, int64_t dim_v_padded)
      : q(zeroed_floats(rows_padded * dim_qk_padded)),
        keys(zeroed_floats(tile_n * dim_qk_padded)),
        values(zeroed_floats(tile_n * dim_v_padded)),
        scores(zeroed_floats(tile_n * rows_padded)),
        out(zeroed_floats(rows_padded * dim_v_padded)),
        row_max(zeroed_floats(rows_padded)),
        row_sum(zeroed_floats(rows_padded)),
        rescale(zeroed_floats(rows_padded)),
        first(zeroed_floats(rows_padded)),
        last(zeroed_floats(rows_padded)),
        lse(zeroed_floats(rows_padded)),
        sources(size_t(tile_n)),
        q_row(size_t(dim_qk_padded)) {}
  Floats q, keys, values, scores, out, row_max, row_sum, rescale, first, last, lse;
  std::vector<RowSource> sources;
  std::vector<float> q_row;
};

class FastEngine {
 public:
  FastEngine(SimdIsa isa, const core::Problem& p, const core::SplitParams& split, int threads)
      : kernels_(kernels_for(isa)),
        p_(p),
        split_(split),
        threads_(thread_count(threads)),
        plan_(make_plan(p, split)),
        dim_qk_padded_(round_up(p.dim_qk, kPad)),
        dim_v_padded_(round_up(p.dim_v, kPad)),
        scale_values_(make_scale_values()),
        keys_(p, false, scale_values_.data()),
        values_(p, true, scale_values_.data()) {}

  void run() {
    std::unique_ptr<PartialStore> partials;
    if (plan_.partials) {
      partials = std::make_unique<PartialStore>(p_, core::partial_slots(p_, split_));
      partial_views_ = &partials->views();
      write_counts_and_empty_splits();
    }
    piece_o_ = zeroed_floats(plan_.piece_slots * plan_.max_rows * dim_v_padded_);
    piece_lse_ = zeroed_floats(plan_.piece_slots * plan_.max_rows);
    const int64_t items = int64_t(plan_.items.size());
#pragma omp parallel num_threads(threads_)
    {
      Scratch scratch(round_up(plan_.max_rows, kPad), split_.tile_n, dim_qk_padded_,
                      dim_v_padded_);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < items; ++i) run_item(plan_.items[size_t(i)], scratch);
#pragma omp for schedule(dynamic, 1)
      for (int64_t g = 0; g < int64_t(plan_.piece_groups.size()); ++g) {
        merge_pieces(plan_.piece_groups[size_t(g)], scratch);
      }
    }
    if (!plan_.partials) {
      write_empty_tiles();
      return;
    }
    combine_partials(*partial_views_, threads_,
                     [&](int64_t b, int64_t h, int64_t i) { return lse_shift(p_, b, h, i); });
  }

 private:
  static std::vector<float> make_scale_values() {
    std::vector<float> v(256);
    for (int e = 0; e < 256; ++e) v[size_t(e)] = mx::decode_scale(uint8_t(e));
    return v;
  }

  // Packed row r of a tile is query row row_first + r % rows of head q.h + r / rows.
  struct RowAt {
    int64_t h, i;
  };
  static RowAt row_at(const PackedTile& t, int64_t r) {
    const int64_t rows = t.q.row_last - t.q.row_first + 1;
    return {t.q.h + r / rows, t.q.row_first + r % rows};
  }

  void write_counts_and_empty_splits() {
    const CombineArgs& v = *partial_views_;
    for (const PackedTile& t : plan_.tiles) {
      for (int64_t r = 0; r < t.rows(); ++r) {
        const RowAt at = row_at(t, r);
        store_count(v.counts, t.q.b, at.h, at.i, t.q.count);
        if (split_.early_exit) continue;
        for (int64_t s = t.q.count; s < t.q.splits; ++s) store_partial_row(t, s, r, nullptr, -INFINITY);
      }
    }
  }

  // Tiles with no visible key at all have no work item; without partials their rows are written
  // here (0 and -inf).
  void write_empty_tiles() {
    for (const PackedTile& t : plan_.tiles) {
      if (t.q.count > 0) continue;
      for (int64_t r = 0; r < t.rows(); ++r) store_final_row(t, r, nullptr, -INFINITY);
    }
  }

  // o == nullptr writes zeros.
  void store_partial_row(const PackedTile& t, int64_t s, int64_t r, const float* o, float lse) const {
    const CombineArgs& v = *partial_views_;
    const RowAt at = row_at(t, r);
    for (int64_t d = 0; d < p_.dim_v; ++d) {
      core::store_float(v.partial_o, partial_o_offset(v.partial_o, s, t.q.b, at.i, at.h, d),
                        o ? o[d] : 0.0f);
    }
    static_cast<float*>(v.partial_lse.data)[partial_lse_offset(v.partial_lse, s, t.q.b, at.h, at.i)] =
        lse;
  }

  void store_final_row(const PackedTile& t, int64_t r, const float* o, float lse) const {
    const TensorView& out = p_.args.o;
    const RowAt at = row_at(t, r);
    for (int64_t d = 0; d < p_.dim_v; ++d) {
      core::store_float(out, core::offset_of(out, t.q.b, at.i, at.h, d), o ? o[d] : 0.0f);
    }
    if (p_.args.lse.given()) {
      static_cast<float*>(p_.args.lse.data)[core::offset_of(p_.args.lse, t.q.b, at.h, at.i)] =
          float(shifted_lse(lse, lse_shift(p_, t.q.b, at.h, at.i)));
    }
  }

  // A split's result (O normalized, natural-log LSE per packed row), to wherever it belongs.
  void store_split(const PackedTile& t, int64_t s, const float* o, int64_t o_stride,
                   const float* lse) const {
    for (int64_t r = 0; r < t.rows(); ++r) {
      if (plan_.partials) {
        store_partial_row(t, s, r, o + r * o_stride, lse[r]);
      } else {
        store_final_row(t, r, o + r * o_stride, lse[r]);
      }
    }
  }

  // Q rows of the tile, times scale * log2(e): row-major for the few-row kernel, else transposed.
  void pack_queries(const PackedTile& t, int64_t rows_padded, Scratch& sc) const {
    const bool few = t.rows() <= kFewRows;
    std::fill(sc.q.get(), sc.q.get() + rows_padded * dim_qk_padded_, 0.0f);
    const float factor = p_.scale * kLog2e;
    for (int64_t r = 0; r < t.rows(); ++r) {
      const RowAt at = row_at(t, r);
      load_q_row(p_, t.q.b, at.i, at.h, sc.q_row.data());
      for (int64_t d = 0; d < p_.dim_qk; ++d) {
        const float x = sc.q_row[size_t(d)] * factor;
        if (few) {
          sc.q[size_t(r * dim_qk_padded_ + d)] = x;
        } else {
          sc.q[size_t(d * rows_padded + r)] = x;
        }
      }
    }
  }

  // The visible keys of key tile `tile` (block index) of packed tile t.
  void prefetch_tile(const PackedTile& t, int64_t tile, int64_t tile_lo, int64_t tile_hi) const {
    const int64_t first = std::max(tile * split_.tile_n, tile_lo);
    const int64_t last = std::min(tile * split_.tile_n + split_.tile_n - 1, tile_hi);
    if (last < first) return;
    keys_.prefetch(t.q.b, t.kv_head, first, last - first + 1);
    values_.prefetch(t.q.b, t.kv_head, first, last - first + 1);
  }

  void run_item(const WorkItem& item, Scratch& sc) const {
    const PackedTile& t = plan_.tiles[size_t(item.tile)];
    const core::Visibility& vis = t.q.vis;
    const int64_t rows = t.rows();
    const int64_t rows_padded = round_up(rows, kPad);
    const int64_t tile_rows = t.q.row_last - t.q.row_first + 1;
    pack_queries(t, rows_padded, sc);
    std::fill(sc.out.get(), sc.out.get() + rows_padded * dim_v_padded_, 0.0f);
    std::fill(sc.row_max.get(), sc.row_max.get() + rows_padded, -INFINITY);
    std::fill(sc.row_sum.get(), sc.row_sum.get() + rows_padded, 0.0f);
    // Keys outside [lo(first row), hi(last row)] are seen by no row of the tile: never read.
    const int64_t tile_lo = vis.lo(t.q.row_first), tile_hi = vis.hi(t.q.row_last);
    for (int64_t pos = item.first; pos < item.first + item.count; ++pos) {
      const int64_t tile_first = t.q.key_tile(pos) * split_.tile_n;
      const int64_t first = std::max(tile_first, tile_lo);
      const int64_t last = std::min(tile_first + split_.tile_n - 1, tile_hi);
      if (last < first) continue;
      const int64_t keys = last - first + 1;
      if (pos + 1 < item.first + item.count) prefetch_tile(t, t.q.key_tile(pos + 1), tile_lo, tile_hi);
      keys_.gather(kernels_, t.q.b, t.kv_head, first, keys, sc.sources.data(), sc.keys.get(),
                   dim_qk_padded_);
      values_.gather(kernels_, t.q.b, t.kv_head, first, keys, sc.sources.data(), sc.values.get(),
                     dim_v_padded_);
      if (rows <= kFewRows) {
        kernels_.scores_by_dim_lanes(sc.keys.get(), dim_qk_padded_, keys, sc.q.get(), rows,
                                     dim_qk_padded_, sc.scores.get(), rows_padded);
      } else {
        kernels_.scores_by_row_lanes(sc.keys.get(), dim_qk_padded_, keys, sc.q.get(), rows_padded,
                                     dim_qk_padded_, sc.scores.get());
      }
      // Bounds are monotone in the row, so the first row's hi and last row's lo decide whether
      // every row sees the whole key range.
      const bool all_visible = vis.lo(t.q.row_last) <= first && vis.hi(t.q.row_first) >= last;
      if (!all_visible) {
        for (int64_t r = 0; r < rows_padded; ++r) {
          const int64_t i = t.q.row_first + (r < rows ? r % tile_rows : 0);
          sc.first[size_t(r)] = float(std::clamp<int64_t>(vis.lo(i) - first, -1, keys));
          sc.last[size_t(r)] = float(std::clamp<int64_t>(vis.hi(i) - first, -1, keys));
        }
      }
      kernels_.softmax_step(sc.scores.get(), rows_padded, keys,
                            all_visible ? nullptr : sc.first.get(), sc.last.get(),
                            sc.row_max.get(), sc.row_sum.get(), sc.rescale.get());
      kernels_.accumulate_values(sc.scores.get(), rows_padded, keys, sc.values.get(),
                                 dim_v_padded_, dim_v_padded_, sc.rescale.get(), rows,
                                 sc.out.get(), dim_v_padded_);
    }
    normalize(rows, sc);
    if (item.pieces == 1) {
      store_split(t, item.split, sc.out.get(), dim_v_padded_, sc.lse.get());
      return;
    }
    float* o = piece_o_.get() + item.piece_slot * plan_.max_rows * dim_v_padded_;
    std::copy(sc.out.get(), sc.out.get() + rows * dim_v_padded_, o);
    std::copy(sc.lse.get(), sc.lse.get() + rows, piece_lse_.get() + item.piece_slot * plan_.max_rows);
  }

  // O /= sum and LSE = ln(sum exp(s)), from the log2-domain state; a row that saw no key gets 0
  // and -inf without touching what was accumulated.
  void normalize(int64_t rows, Scratch& sc) const {
    for (int64_t r = 0; r < rows; ++r) {
      float* o = sc.out.get() + r * dim_v_padded_;
      const float sum = sc.row_sum[size_t(r)];
      if (sum == 0.0f) {
        std::fill(o, o + p_.dim_v, 0.0f);
        sc.lse[size_t(r)] = -INFINITY;
        continue;
      }
      const float inverse = 1.0f / sum;
      for (int64_t d = 0; d < p_.dim_v; ++d) o[d] *= inverse;
      sc.lse[size_t(r)] = (sc.row_max[size_t(r)] + std::log2(sum)) * kLn2;
    }
  }

  // The pieces of one split, merged with SPEC 3's algebra into the split's result.
  void merge_pieces(const PieceGroup& g, Scratch& sc) const {
    const PackedTile& t = plan_.tiles[size_t(g.tile)];
    const int64_t rows = t.rows();
    std::vector<float> weights(size_t(g.pieces));
    for (int64_t r = 0; r < rows; ++r) {
      auto piece_lse = [&](int64_t k) {
        return piece_lse_[size_t((g.first_slot + k) * plan_.max_rows + r)];
      };
      const core::MergeScale st = core::merge_weights(g.pieces, piece_lse, weights.data());
      const float divisor = core::merge_divisor(st.sum);
      float* o = sc.out.get() + r * dim_v_padded_;
      std::fill(o, o + p_.dim_v, 0.0f);
      for (int64_t k = 0; k < g.pieces; ++k) {
        const float* piece =
            piece_o_.get() + ((g.first_slot + k) * plan_.max_rows + r) * dim_v_padded_;
        for (int64_t d = 0; d < p_.dim_v; ++d) o[d] += weights[size_t(k)] * piece[d];
      }
      for (int64_t d = 0; d < p_.dim_v; ++d) o[d] /= divisor;
      sc.lse[size_t(r)] = core::merge_lse(st.m, st.sum);
    }
    store_split(t, g.split, sc.out.get(), dim_v_padded_, sc.lse.get());
  }

  const FastKernels& kernels_;
  const core::Problem& p_;
  core::SplitParams split_;
  int threads_;
  Plan plan_;
  int64_t dim_qk_padded_, dim_v_padded_;
  std::vector<float> scale_values_;
  RowGather keys_, values_;
  const CombineArgs* partial_views_ = nullptr;
  Floats piece_o_, piece_lse_;
};

}  // namespace

void run_fast_with(SimdIsa isa, const core::Problem& p, const core::SplitParams& split,
                   int threads) {
  FastEngine(isa, p, split, threads).run();
}

}  // namespace mxattn::cpu
