// The fast CPU engine: flash-style online softmax over the spec §3 partition of plan.h, one work
// item per (batch, query tile, split, piece) and run of KV heads, on OpenMP threads. The query
// heads of a GQA group are packed into one tile, so each K/V tile is dequantized once and used by
// all of them; decode items take several KV heads at once, so that they read the cache front to
// back. The arithmetic lives in the kernel sets of fast_kernels.h; this file gathers rows, plans
// the work and writes the results.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <pmmintrin.h>  // _MM_DENORMALS_ZERO_ON
#include <xmmintrin.h>
#endif

#include "base/float16.h"
#include "core/combine.h"
#include "core/plan.h"
#include "cpu/aligned.h"
#include "cpu/engines.h"
#include "cpu/fast.h"
#include "cpu/fast_rows.h"
#include "cpu/partials.h"
#include "cpu/row_tile_scratch.h"
#include "cpu/rows.h"

namespace mxattn::cpu {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;
// Packed rows and head dims are padded to the widest vector, 16 f32 lanes.
constexpr int64_t kPad = 16;
// Query tiles of up to this many rows per head (decode) use the kernel with vectors along the head
// dim. The choice depends only on the tile size, never on how many heads or tiles are packed
// together, so every row is computed the same way however the plan groups it.
constexpr int64_t kFewRows = 8;
// K and V tiles of a group of KV heads stay within this many f32 (half of a 2 MiB L2).
constexpr int64_t kGroupScratchFloats = int64_t(1) << 18;
// The kernels that read K and V rows directly work on whole blocks of 32 elements, and the AMX
// kernels on 64-byte tile rows of 32 bf16; the AMX kernels' weight scratch holds 32 rows.
constexpr int64_t kDirectBlock = 32;
// The bf16 dot products of scores_bf16_from_rows read keys 128 elements at a time.
constexpr int64_t kDotChunk = 128;
constexpr int64_t kTileBf16 = 32;
constexpr int64_t kTileRows = 16;
constexpr int64_t kAmxBlockRows = 32;
// The AMX kernels take consecutive key tiles whose keys follow on from each other as one step of
// up to this many keys: every step reads and writes the whole output tile, which then happens
// once per 128 keys instead of once per key tile.
constexpr int64_t kAmxStepKeys = 128;
// Query tiles with the same key tiles are merged up to this many packed rows; the AMX kernels,
// whose K and V packing is shared by every row of a tile, take twice as many.
constexpr int64_t kMaxPackedRows = 256;
constexpr int64_t kMaxAmxPackedRows = 512;
// A split's key tiles are cut into pieces of at most this many, each its own work item, merged
// afterwards: one long sequence then keeps every thread busy. The cut depends only on the tile's
// own key count, so results do not depend on the batch or the thread count.
constexpr int64_t kPieceTiles = 32;

int64_t round_up(int64_t x, int64_t m) {
  return core::ceil_div(x, m) * m;
}

using Floats = Aligned<float>;
Floats zeroed_floats(int64_t n) {
  return zeroed<float>(n);
}

struct PackedTile {
  core::QueryTile q;  // the plan's tile of the first packed head
  int64_t kv_head = 0;
  int64_t heads = 1;  // packed query heads q.h, q.h + 1, ...
  int64_t rows() const { return heads * (q.row_last - q.row_first + 1); }
};

// Packed tiles of consecutive KV heads (same batch, rows and key tiles), run as one work item:
// plan tiles [first, first + count).
struct TileGroup {
  int64_t first = 0;
  int64_t count = 1;
};

// One split of a tile group: key-tile positions [first, first + count), piece `piece` of `pieces`.
// With pieces > 1, tile k of the group leaves its result in piece slot
// piece_base + k * pieces + piece, merged by Plan::merges[merge].
struct WorkItem {
  int64_t group = 0;  // index into Plan::groups
  int64_t split = 0;
  int64_t first = 0;
  int64_t count = 0;
  int64_t piece = 0;
  int64_t pieces = 1;
  int64_t piece_base = 0;
  int64_t merge = -1;  // index into Plan::merges where pieces > 1
};

// A split of a tile group run as several pieces: pieces * (the group's tiles) piece results, the
// last of which to be stored has its thread merge them.
struct PieceMerge {
  int64_t group = 0;
  int64_t split = 0;
  int64_t pieces = 0;
  int64_t piece_base = 0;
};

struct Plan {
  std::vector<PackedTile> tiles;  // by batch, query tile, then KV head
  std::vector<TileGroup> groups;
  std::vector<WorkItem> items;
  std::vector<PieceMerge> merges;
  int64_t piece_slots = 0;
  int64_t max_rows = 0;         // packed rows of the largest tile
  int64_t max_group_tiles = 1;  // tiles of the largest group
  int64_t tail_first = 0;       // the first of the last `threads` items (or tiles of them)
  bool partials = false;        // results go through partials and the combine
};

bool few_rows_per_head(const core::Problem& p, const core::SplitParams& split) {
  return std::min(split.tile_m, p.seq_q) <= kFewRows;
}

// The bf16 parts the AMX kernels split a value of type t into (Bf16TileStep); 0: none (MX).
int bf16_parts(DType t) {
  switch (t) {
    case DType::bf16:
      return 1;
    case DType::f16:
      return 2;
    case DType::f32:
      return 3;
    default:
      return 0;
  }
}

// Whether the many-row tiles run on the AMX kernels: the set has them and Q, K and V are f32, f16
// or bf16.
bool amx_tiles(const FastKernels& kernels, const core::Problem& p, const core::SplitParams& split) {
  return kernels.attend_bf16 && !few_rows_per_head(p, split) && bf16_parts(p.args.q.dtype) > 0 &&
         bf16_parts(p.args.k.dtype) > 0 && bf16_parts(p.args.v.dtype) > 0;
}

// Whether the AMX few-row kernel (RowTileStep) takes rows of format f, as chosen_row_tiles
// allows: bf16, and FP8 with MX blocks along the row.
bool row_tile_format(const RowFormat& f, RowTiles allowed) {
  if (f.elem == RowElem::bf16) return allowed != RowTiles::none;
  return allowed == RowTiles::all && (f.elem == RowElem::e4m3 || f.elem == RowElem::e5m2) &&
         f.scale_span == 32;
}

// x[0, n) times `sign` as `parts` bf16 parts (Bf16TileStep): part 0 truncated to bf16, each next
// part the rest truncated again, the last rounded, so that x is their sum (exactly for 3 parts).
// x is overwritten. Plain loops, which the compiler vectorizes.
void split_bf16(float* x, int64_t n, float sign, int parts, uint16_t* const* out) {
  for (int64_t d = 0; d < n; ++d) x[d] *= sign;
  for (int i = 0; i + 1 < parts; ++i) {
    for (int64_t d = 0; d < n; ++d) {
      const uint32_t bits = std::bit_cast<uint32_t>(x[d]);
      out[i][d] = uint16_t(bits >> 16);
      x[d] -= std::bit_cast<float>(bits & 0xffff0000u);
    }
  }
  for (int64_t d = 0; d < n; ++d) out[parts - 1][d] = base::float_to_bf16(x[d]);
}

// Values o[0, n) into elements at, at + step, ... of v (f32, f16 or bf16); o null: zeros.
void store_row(const TensorView& v, int64_t at, int64_t step, const float* o, int64_t n) {
  if (o == nullptr || step != 1) {
    for (int64_t d = 0; d < n; ++d) base::store_float(v, at + d * step, o ? o[d] : 0.0f);
    return;
  }
  switch (v.dtype) {
    case DType::f16: {
      uint16_t* out = static_cast<uint16_t*>(v.data) + at;
      for (int64_t d = 0; d < n; ++d) out[d] = base::float_to_f16(o[d]);
      return;
    }
    case DType::bf16: {
      uint16_t* out = static_cast<uint16_t*>(v.data) + at;
      for (int64_t d = 0; d < n; ++d) out[d] = base::float_to_bf16(o[d]);
      return;
    }
    default:
      std::copy(o, o + n, static_cast<float*>(v.data) + at);
  }
}

// GQA packing and KV-head groups need every head to have the same key tiles: always true dense,
// and with a sparse layout broadcast over heads.
bool heads_share_key_tiles(const core::Problem& p) {
  return !p.sparse || p.args.sparse.row_ptr.shape[1] == 1;
}

// Split s of a query tile, cut into pieces.
struct SplitPieces {
  core::TileRun run;
  int64_t pieces = 0;
  int64_t per_piece = 0;
};
SplitPieces split_pieces(const core::QueryTile& q, int64_t s) {
  SplitPieces sp;
  sp.run = core::split_tiles(q.run, q.splits, s);
  sp.pieces = core::ceil_div(sp.run.count, kPieceTiles);
  sp.per_piece = core::ceil_div(sp.run.count, sp.pieces);
  return sp;
}

// Extends the query tiles `merged` (one per head group) by the next ones, `next`, when every row
// still computes exactly what it would alone: the same key tiles and splits, or, with a single
// split on both sides, overlapping key-tile runs, whose union the merged tile visits (a row given
// a key tile it sees nothing of is left unchanged by it). False, and nothing changed, otherwise.
bool merge_tiles(std::vector<core::QueryTile>& merged, const std::vector<core::QueryTile>& next) {
  for (size_t k = 0; k < merged.size(); ++k) {
    const core::QueryTile &m = merged[k], &n = next[k];
    if (m.cols != n.cols) return false;
    const bool same =
        m.run.begin == n.run.begin && m.run.count == n.run.count && m.splits == n.splits;
    const bool single_splits = m.splits == 1 && n.splits == 1 && m.count == 1 && n.count == 1;
    const bool overlapping =
        n.run.begin <= m.run.begin + m.run.count && m.run.begin <= n.run.begin + n.run.count;
    if (!same && !(single_splits && overlapping)) return false;
  }
  for (size_t k = 0; k < merged.size(); ++k) {
    core::QueryTile& m = merged[k];
    const core::QueryTile& n = next[k];
    const int64_t begin = std::min(m.run.begin, n.run.begin);
    const int64_t end = std::max(m.run.begin + m.run.count, n.run.begin + n.run.count);
    m.run = {begin, end - begin};
    m.row_last = n.row_last;
  }
  return true;
}

// Threads take items as they come free, so they finish up to an item apart. Where items group
// several tiles (decode), the last `threads` items run one tile each instead: the threads, which
// reach them up to one grouped item apart, then finish about one tile's item apart (those items,
// from tail_first, are not claimed ahead: FastEngine::run). Which thread runs which tile changes
// no arithmetic, and each tile keeps its piece slots and merge.
void run_last_items_by_tile(Plan& plan, int threads) {
  const size_t n = plan.items.size();
  const size_t tail = std::min(n, size_t(threads));
  std::vector<int64_t> own_group(plan.tiles.size(), -1);  // a group of the tile alone
  std::vector<WorkItem> items(plan.items.begin(), plan.items.end() - int64_t(tail));
  plan.tail_first = int64_t(items.size());
  for (size_t i = n - tail; i < n; ++i) {
    const WorkItem& item = plan.items[i];
    const TileGroup g = plan.groups[size_t(item.group)];
    for (int64_t k = 0; k < g.count; ++k) {
      int64_t& gi = own_group[size_t(g.first + k)];
      if (gi < 0) {
        gi = int64_t(plan.groups.size());
        plan.groups.push_back({g.first + k, 1});
      }
      WorkItem one = item;
      one.group = gi;
      one.piece_base = item.piece_base + k * item.pieces;
      items.push_back(one);
    }
  }
  plan.items = std::move(items);
}

Plan make_plan(const core::Problem& p, const core::SplitParams& split, int threads,
               int64_t max_packed_rows) {
  Plan plan;
  const bool shared_tiles = heads_share_key_tiles(p);
  const int64_t pack = shared_tiles ? p.group : 1;
  const int64_t head_groups = p.heads_q / pack;
  const int64_t q_tiles = core::query_tiles_per_head(p, split);
  plan.partials = p.args.split.partial_o.given() || p.args.split.partial_lse.given() ||
                  p.args.split.counts.given();
  // Consecutive query tiles run as one taller tile where merge_tiles allows it, so a K/V tile is
  // converted once for more rows.
  std::vector<int64_t> batch_first_block(size_t(p.batch) + 1, 0);
  int64_t single_head_items = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    std::vector<std::vector<core::QueryTile>> by_tile(static_cast<size_t>(q_tiles));
    for (int64_t t = 0; t < q_tiles; ++t) {
      for (int64_t h = 0; h < p.heads_q; h += pack) {
        by_tile[size_t(t)].push_back(core::query_tile(p, split, b, h, t));
      }
    }
    int64_t blocks = 0;
    for (int64_t t = 0; t < q_tiles; ++blocks) {
      std::vector<core::QueryTile> merged = by_tile[size_t(t)];
      int64_t end = t + 1;
      while (end < q_tiles &&
             pack * (by_tile[size_t(end)][0].row_last - merged[0].row_first + 1) <=
                 max_packed_rows &&
             merge_tiles(merged, by_tile[size_t(end)])) {
        ++end;
      }
      for (int64_t hg = 0; hg < head_groups; ++hg) {
        const PackedTile tile{merged[size_t(hg)], hg * pack / p.group, pack};
        plan.partials = plan.partials || tile.q.splits > 1;
        plan.max_rows = std::max(plan.max_rows, tile.rows());
        for (int64_t s = 0; s < tile.q.count; ++s)
          single_head_items += split_pieces(tile.q, s).pieces;
        plan.tiles.push_back(tile);
      }
      t = end;
    }
    batch_first_block[size_t(b) + 1] = batch_first_block[size_t(b)] + blocks;
  }
  // With few rows per tile (decode) reading K and V is the cost: items of several KV heads then
  // read whole tokens of the cache, as long as every thread still gets a few items. Grouping
  // changes no arithmetic, only which thread does what.
  int64_t group_tiles = 1;
  if (shared_tiles && few_rows_per_head(p, split)) {
    const int64_t tile_floats = split.tile_n * (round_up(p.dim_qk, kPad) + round_up(p.dim_v, kPad));
    const int64_t most =
        std::min(head_groups, std::max<int64_t>(1, kGroupScratchFloats / tile_floats));
    group_tiles = std::clamp<int64_t>(single_head_items / (4 * int64_t(threads)), 1, most);
  }
  plan.max_group_tiles = group_tiles;
  const int64_t chunks = core::ceil_div(head_groups, group_tiles);
  for (int64_t first = 0; first < int64_t(plan.tiles.size()); first += head_groups) {
    for (int64_t k = 0; k < head_groups; k += group_tiles) {
      plan.groups.push_back({first + k, std::min(group_tiles, head_groups - k)});
    }
  }
  // Items of one batch entry and run of heads go together, heaviest first: consecutive items then
  // share their K and V (often still in cache), and the last ones are short.
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const size_t first_item = plan.items.size();
      for (int64_t block = batch_first_block[size_t(b)]; block < batch_first_block[size_t(b) + 1];
           ++block) {
        const int64_t gi = block * chunks + chunk;
        const TileGroup& g = plan.groups[size_t(gi)];
        const core::QueryTile& q = plan.tiles[size_t(g.first)].q;
        for (int64_t s = 0; s < q.count; ++s) {
          const SplitPieces sp = split_pieces(q, s);
          const int64_t merge = sp.pieces > 1 ? int64_t(plan.merges.size()) : -1;
          if (sp.pieces > 1) plan.merges.push_back({gi, s, sp.pieces, plan.piece_slots});
          for (int64_t k = 0; k < sp.pieces; ++k) {
            const int64_t first = sp.run.begin + k * sp.per_piece;
            const int64_t count = std::min(sp.per_piece, sp.run.begin + sp.run.count - first);
            plan.items.push_back({gi, s, first, count, k, sp.pieces, plan.piece_slots, merge});
          }
          if (sp.pieces > 1) plan.piece_slots += sp.pieces * g.count;
        }
      }
      std::stable_sort(plan.items.begin() + int64_t(first_item), plan.items.end(),
                       [&](const WorkItem& x, const WorkItem& y) { return x.count > y.count; });
    }
  }
  if (group_tiles > 1) {
    run_last_items_by_tile(plan, threads);
  } else {
    plan.tail_first = std::max<int64_t>(0, int64_t(plan.items.size()) - threads);
  }
  return plan;
}

// How the K or V rows of one kv head read, and where each key's row starts.
class RowGather {
 public:
  RowGather(const core::Problem& p, bool values)
      : p_(p),
        view_(values ? &p.args.v : &p.args.k),
        scales_(values ? &p.args.v_scales : &p.args.k_scales),
        scales_along_keys_(values && p.args.v_scale_axis == VScaleAxis::keys),
        tables_(view_->dtype),
        format_(tables_.format(values ? p.dim_v : p.dim_qk, view_->stride[3],
                               scales_along_keys_ ? 1 : 32,
                               scales_->given() ? scales_->stride[3] : 0)) {}

  const RowFormat& format() const { return format_; }

  // Whether the few-row kernels that read rows directly take these rows (f16 only contiguous).
  bool direct() const {
    return format_.elem == RowElem::bf16 ||
           (format_.elem == RowElem::f16 && format_.elem_stride == 1) ||
           ((format_.elem == RowElem::e4m3 || format_.elem == RowElem::e5m2) &&
            !scales_along_keys_);
  }

  // Rows of keys [first, first + count) of (b, kv heads [hk, hk + heads)) into dst as f32, key k
  // of head h at row k * heads + h (row stride dst_stride). Token by token, so a dense cache is
  // read front to back.
  void gather(const FastKernels& kernels, int64_t b, int64_t hk, int64_t heads, int64_t first,
              int64_t count, RowSource* sources, float* dst, int64_t dst_stride) const {
    locate(b, hk, heads, first, count, sources);
    kernels.convert_rows(format_, sources, count * heads, dst, dst_stride);
  }

  // The f32 rows as they lie, for kernels that take rows `key_step()` floats apart and heads
  // `head_step()` apart: the first row of key `first`, kv head hk, of a dense f32 cache whose head
  // dim is contiguous and `width` long (the kernels' padded width: no padding to fill). Null where
  // the rows must be gathered. A dense cache's tile is then read where it lies, not copied first.
  const float* in_place(int64_t b, int64_t hk, int64_t first, int64_t width) const {
    if (p_.paged || view_->dtype != DType::f32 || view_->stride[3] != 1 || format_.width != width) {
      return nullptr;
    }
    return static_cast<const float*>(view_->data) + base::offset_of(*view_, b, first, hk, 0);
  }
  int64_t key_step() const { return view_->stride[1]; }
  int64_t head_step() const { return view_->stride[2]; }

  // Where the rows of gather start, in the same order. Not inlined: within run_item its loop
  // counters were kept on the stack.
  [[gnu::noinline]] void locate(int64_t b, int64_t hk, int64_t heads, int64_t first, int64_t count,
                                RowSource* sources) const {
    const uint8_t* data = static_cast<const uint8_t*>(view_->data);
    const uint8_t* scales = static_cast<const uint8_t*>(scales_->data);
    if (!p_.paged && !scales_along_keys_) {
      // Dense: every address is a fixed step from the first.
      const uint8_t* row = data + byte_offset(base::offset_of(*view_, b, first, hk, 0));
      const int64_t key_step = byte_offset(view_->stride[1]),
                    head_step = byte_offset(view_->stride[2]);
      const uint8_t* scale = scales ? scales + base::offset_of(*scales_, b, first, hk, 0) : nullptr;
      const int64_t scale_key_step = scales ? scales_->stride[1] : 0;
      const int64_t scale_head_step = scales ? scales_->stride[2] : 0;
      // Offsets stepped in registers, sources written in order: indexing every source afresh
      // kept more counters than registers (about 2 ns a source).
      RowSource* out = sources;
      int64_t key_at = 0, scale_key_at = 0;
      for (int64_t k = 0; k < count; ++k) {
        int64_t at = key_at, scale_at = scale_key_at;
        for (int64_t h = 0; h < heads; ++h) {
          *out++ = {row + at, scale ? scale + scale_at : nullptr};
          at += head_step;
          scale_at += scale_head_step;
        }
        key_at += key_step;
        scale_key_at += scale_key_step;
      }
      return;
    }
    for (int64_t k = 0; k < count; ++k) {
      const int64_t j = first + k;
      const int64_t page = p_.kv_page(b, j), slot = p_.kv_slot(j);
      for (int64_t h = 0; h < heads; ++h) {
        RowSource& src = sources[k * heads + h];
        src.data = data + byte_offset(base::offset_of(*view_, page, slot, hk + h, 0));
        if (scales) {
          src.scales =
              scales + (scales_along_keys_ ? base::offset_of(*scales_, page, hk + h, slot / 32, 0)
                                           : base::offset_of(*scales_, page, slot, hk + h, 0));
        }
      }
    }
  }

 private:
  // Bytes from the view's start to element offset `elements` (packed rows start on whole bytes).
  int64_t byte_offset(int64_t elements) const { return elements * bits_of(view_->dtype) / 8; }

  const core::Problem& p_;
  const TensorView* view_;
  const TensorView* scales_;
  bool scales_along_keys_;
  RowTables tables_;
  RowFormat format_;
};

// What the per-thread scratch holds, for the largest tile group of the plan.
struct ScratchShape {
  const FastKernels* kernels = nullptr;  // the kernel set that fills it
  int64_t heads = 1, rows_padded = 0, tile_n = 0, dim_qk_padded = 0, dim_v_padded = 0;
  int64_t dim_qk = 0, dim_v = 0;  // the columns written: those past them stay zero
  bool row_tiles = true;          // f32 K and V tiles (not when the kernels read the rows directly)
  bool bf16_tiles = false;        // the AMX kernels' operands and scratch
  bool bf16_queries = false;      // bf16 queries (the AMX kernels, scores_bf16_from_rows)
  int64_t row_tile_q_words = 0;   // the AMX few-row kernel's scratch (0: none): Q^T tiles a head
  // The AMX kernels' bf16 parts of Q, K, V and the weights (Bf16TileStep).
  int q_parts = 1, key_parts = 1, value_parts = 1, weight_parts = 2;
  int64_t keys_padded() const { return round_up(tile_n, kTileBf16); }  // tile_n: keys per step
  bool operator==(const ScratchShape&) const = default;
};

// Per-thread scratch: K and V tiles, queries and softmax state of each head of a tile group.
class Scratch {
 public:
  explicit Scratch(const ScratchShape& s)
      : shape_(s),
        keys(zeroed_floats(s.row_tiles ? s.heads * s.tile_n * s.dim_qk_padded : 0)),
        values(zeroed_floats(s.row_tiles ? s.heads * s.tile_n * s.dim_v_padded : 0)),
        scores(zeroed_floats(s.tile_n * s.rows_padded)),
        first(zeroed_floats(s.rows_padded)),
        last(zeroed_floats(s.rows_padded)),
        key_sources(size_t(s.heads * s.tile_n)),
        value_sources(key_sources.size()),
        next_key_sources(key_sources.size()),
        next_value_sources(key_sources.size()),
        q_row(size_t(s.dim_qk_padded)),
        q_(zeroed_floats(s.heads * s.rows_padded * s.dim_qk_padded)),
        out_(zeroed_floats(s.heads * s.rows_padded * s.dim_v_padded)),
        row_state_(zeroed_floats(s.heads * s.rows_padded * kRowArrays)),
        bf16_q_(zeroed<uint16_t>(
            s.bf16_queries ? s.q_parts * s.heads * s.rows_padded * s.dim_qk_padded : 0)),
        block_scores(zeroed_floats(s.bf16_tiles ? kAmxBlockRows * s.keys_padded() : 0)) {
    if (s.row_tile_q_words > 0) {
      q_tiles_ = zeroed<uint32_t>(s.heads * s.row_tile_q_words);
      row_tile = RowTileScratch(s.tile_n, s.rows_padded, s.dim_qk_padded, s.dim_v_padded);
      q_parts_row.resize(size_t(kMaxBf16Parts * s.dim_qk_padded));
    }
    if (!s.bf16_tiles) return;
    for (int i = 0; i < s.key_parts; ++i) {
      packed_keys[i] = zeroed<uint32_t>(s.dim_qk_padded / 2 * s.keys_padded());
    }
    for (int i = 0; i < s.value_parts; ++i) {
      packed_values[i] = zeroed<uint32_t>(s.keys_padded() / 2 * s.dim_v_padded);
    }
    for (int i = 0; i < s.weight_parts; ++i) {
      weights[i] = zeroed<uint16_t>(kAmxBlockRows * s.keys_padded());
    }
  }

  // The queries and softmax state of head k of a group: rows_padded rows each.
  struct Head {
    float* q;
    float* out;  // rows x dim_v_padded
    float* row_max;
    float* row_sum;
    float* rescale;
    float* lse;
  };
  const ScratchShape& shape() const { return shape_; }

  Head head(int64_t k) {
    const int64_t rows = shape_.rows_padded;
    float* state = row_state_.get() + k * rows * kRowArrays;
    return {q_.get() + k * rows * shape_.dim_qk_padded,
            out_.get() + k * rows * shape_.dim_v_padded,
            state,
            state + rows,
            state + 2 * rows,
            state + 3 * rows};
  }

  // Head k's queries as the AMX few-row kernel's tiles of Q^T (RowTileStep::q_tiles),
  // q_tile_words() words a head.
  uint32_t* q_tiles(int64_t k) { return q_tiles_.get() + k * shape_.row_tile_q_words; }
  int64_t q_tile_words() const { return shape_.row_tile_q_words; }

  // Head k's queries as bf16 (part `part` of the AMX kernels' parts), for the AMX kernels and
  // scores_bf16_from_rows: rows_padded rows of dim_qk_padded.
  uint16_t* bf16_queries(int64_t k, int part = 0) {
    const int64_t size = shape_.rows_padded * shape_.dim_qk_padded;
    return bf16_q_.get() + (part * shape_.heads + k) * size;
  }

 private:
  static constexpr int64_t kRowArrays = 4;
  ScratchShape shape_;

 public:
  Floats keys, values, scores, first, last;
  // Where the rows of the current tile start, and (read directly) those of the next tile.
  std::vector<RowSource> key_sources, value_sources, next_key_sources, next_value_sources;
  std::vector<float> q_row;
  std::vector<uint16_t> q_parts_row;  // a query row's bf16 parts (the AMX few-row kernel)

 private:
  Floats q_, out_, row_state_;
  Aligned<uint16_t> bf16_q_;
  Aligned<uint32_t> q_tiles_;

 public:
  // The AMX kernels' K and V operands of the current tile and head (a part each), and their
  // scratch.
  Floats block_scores;
  Aligned<uint32_t> packed_keys[kMaxBf16Parts], packed_values[kMaxBf16Parts];
  Aligned<uint16_t> weights[kMaxBf16Parts];
  // The AMX few-row kernel's scratch (RowTileStep).
  RowTileScratch row_tile;
};

// The calling thread's scratch, kept from one call to the next (OpenMP's threads live on), and
// built (zeroed) again only for a call of another shape: at 16 threads, building every thread's
// scratch took 0.1-0.5 ms of each 2 ms decode call. The items of one
// call already share a thread's scratch: each writes what it reads (queries, state, the rows of
// each step), except the columns past the head dims, which stay zero and are part of the shape.
Scratch& thread_scratch(const ScratchShape& shape) {
  thread_local std::unique_ptr<Scratch> kept;
  if (!kept || !(kept->shape() == shape)) {
    kept.reset();
    kept = std::make_unique<Scratch>(shape);
  }
  return *kept;
}

// Subnormal f32 results flushed to zero and subnormal inputs read as zero (x86 MXCSR FTZ and DAZ)
// on the engine's threads while they run its work items and merge their pieces (not in the
// combine of the split partials, which runs after); then the caller's mode again, with the
// exception flags raised meanwhile kept. A softmax weight below 2^-126 (a score more than 126 log2
// units under its row's maximum) is then 0 instead of a subnormal, which the vector units compute
// many times more slowly (an f32 prefill whose scores spread that far ran 21x slower); what is
// lost is below 2^-126 of the row's largest weight.
class FlushSubnormals {
 public:
  FlushSubnormals() {
#if defined(__x86_64__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | _MM_FLUSH_ZERO_ON | _MM_DENORMALS_ZERO_ON);
#endif
  }
  ~FlushSubnormals() {
#if defined(__x86_64__)
    _mm_setcsr((_mm_getcsr() & _MM_EXCEPT_MASK) | (saved_ & ~unsigned(_MM_EXCEPT_MASK)));
#endif
  }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  [[maybe_unused]] unsigned saved_ = 0;
};

class FastEngine {
 public:
  FastEngine(SimdIsa isa, RowTiles row_tiles, const core::Problem& p,
             const core::SplitParams& split, int threads)
      : kernels_(fast_kernels(isa)),
        p_(p),
        split_(split),
        threads_(thread_count(threads)),
        plan_(make_plan(p, split, threads_,
                        amx_tiles(kernels_, p, split) ? kMaxAmxPackedRows : kMaxPackedRows)),
        keys_(p, false),
        values_(p, true),
        few_rows_(few_rows_per_head(p, split)),
        direct_(few_rows_ && kernels_.scores_from_rows && keys_.direct() && values_.direct()),
        bf16_scores_(direct_ && kernels_.scores_bf16_from_rows && p.args.q.dtype == DType::bf16 &&
                     keys_.format().elem_stride == 1 && keys_.format().elem != RowElem::f16),
        amx_(amx_tiles(kernels_, p, split)),
        row_tiles_(direct_ && kernels_.attend_rows_bf16 &&
                   row_tile_format(keys_.format(), row_tiles) &&
                   row_tile_format(values_.format(), row_tiles)),
        rows_padded_(round_up(plan_.max_rows, kPad)),
        dim_qk_padded_(round_up(p.dim_qk, bf16_scores_ ? kDotChunk
                                          : direct_    ? kDirectBlock
                                          : amx_       ? kTileBf16
                                                       : kPad)),
        dim_v_padded_(round_up(p.dim_v, direct_ ? kDirectBlock
                                        : amx_  ? kTileBf16
                                                : kPad)) {}

  void run() {
    std::unique_ptr<PartialStore> partials;
    if (plan_.partials) {
      partials = std::make_unique<PartialStore>(p_, core::partial_slots(p_, split_));
      partial_views_ = &partials->views();
      write_counts_and_empty_splits();
    }
    // Every slot is written by its piece before its merge reads it.
    piece_o_ = uninitialized<float>(plan_.piece_slots * plan_.max_rows * dim_v_padded_);
    piece_lse_ = uninitialized<float>(plan_.piece_slots * plan_.max_rows);
    const int64_t items = int64_t(plan_.items.size());
    // The piece results each merge still waits for; the thread that stores the last one merges.
    std::unique_ptr<std::atomic<int64_t>[]> merge_waits(
        new std::atomic<int64_t>[plan_.merges.size()]);
    for (size_t m = 0; m < plan_.merges.size(); ++m) {
      const PieceMerge& pm = plan_.merges[m];
      merge_waits[m].store(pm.pieces * plan_.groups[size_t(pm.group)].count,
                           std::memory_order_relaxed);
    }
    // Items are taken one at a time as threads come free. With the direct-row kernels (decode) a
    // thread claims its next item when it starts one, so that the last tile of an item fetches
    // the first of the next (which a thread otherwise reads without a fetch ahead). Claimed ahead,
    // an item waits for the one before it while another thread may have none, so the last items
    // (from tail_first), and every item of other plans, are claimed as threads finish.
    std::atomic<int64_t> next_item{0};
    const auto claim = [&] { return next_item.fetch_add(1, std::memory_order_relaxed); };
    const int64_t ahead_until = direct_ ? plan_.tail_first : 0;
#pragma omp parallel num_threads(threads_)
    {
      const FlushSubnormals flush;
      Scratch& scratch = thread_scratch(scratch_shape());
      int64_t i = claim();
      while (i < items) {
        const int64_t following =
            next_item.load(std::memory_order_relaxed) < ahead_until ? claim() : -1;
        const WorkItem& item = plan_.items[size_t(i)];
        run_item(item, scratch,
                 following >= 0 && following < items ? &plan_.items[size_t(following)] : nullptr);
        // acq_rel: the merge sees every piece stored before the other threads' decrements.
        const int64_t stored = plan_.groups[size_t(item.group)].count;
        if (item.merge >= 0 && merge_waits[size_t(item.merge)].fetch_sub(
                                   stored, std::memory_order_acq_rel) == stored) {
          merge_pieces(plan_.merges[size_t(item.merge)], scratch);
        }
        i = following >= 0 ? following : claim();
      }
      if (row_tiles_) kernels_.release_tiles();
    }
    if (!plan_.partials) {
      write_empty_tiles();
    } else {
      combine_partials(*partial_views_, threads_,
                       [&](int64_t b, int64_t h, int64_t i) { return lse_shift(p_, b, h, i); });
    }
  }

 private:
  ScratchShape scratch_shape() const {
    ScratchShape s;
    s.kernels = &kernels_;
    s.dim_qk = p_.dim_qk;
    s.dim_v = p_.dim_v;
    s.heads = plan_.max_group_tiles;
    s.rows_padded = rows_padded_;
    s.tile_n = amx_ ? std::max(split_.tile_n, kAmxStepKeys) : split_.tile_n;
    s.dim_qk_padded = dim_qk_padded_;
    s.dim_v_padded = dim_v_padded_;
    s.row_tiles = !direct_ && !amx_;
    s.bf16_tiles = amx_;
    s.bf16_queries = amx_ || bf16_scores_;
    if (row_tiles_) {
      const int64_t blocks = core::ceil_div(rows_padded_, row_block());
      s.row_tile_q_words = blocks * (dim_qk_padded_ / 2) * row_block() * row_q_parts();
    }
    if (amx_) {
      s.q_parts = bf16_parts(p_.args.q.dtype);
      s.key_parts = bf16_parts(p_.args.k.dtype);
      s.value_parts = bf16_parts(p_.args.v.dtype);
      s.weight_parts = weight_parts();
    }
    return s;
  }

  // Packed row r of a tile is query row row_first + r % rows of head q.h + r / rows.
  struct RowAt {
    int64_t h, i;
  };
  static RowAt row_at(const PackedTile& t, int64_t r) {
    const int64_t rows = t.q.row_last - t.q.row_first + 1;
    return {t.q.h + r / rows, t.q.row_first + r % rows};
  }

  void write_counts_and_empty_splits() const {
    const CombineArgs& v = *partial_views_;
    for (const PackedTile& t : plan_.tiles) {
      for (int64_t r = 0; r < t.rows(); ++r) {
        const RowAt at = row_at(t, r);
        store_count(v.counts, t.q.b, at.h, at.i, t.q.count);
        if (split_.early_exit) continue;
        for (int64_t s = t.q.count; s < t.q.splits; ++s) {
          store_partial_row(t, s, r, nullptr, -INFINITY);
        }
      }
    }
  }

  // Tiles with no visible key at all have no work item; without partials their rows are written
  // here (0 and -inf).
  void write_empty_tiles() const {
    for (const PackedTile& t : plan_.tiles) {
      if (t.q.count > 0) continue;
      for (int64_t r = 0; r < t.rows(); ++r) store_final_row(t, r, nullptr, -INFINITY);
    }
  }

  // o == nullptr writes zeros.
  void store_partial_row(const PackedTile& t, int64_t s, int64_t r, const float* o,
                         float lse) const {
    const CombineArgs& v = *partial_views_;
    const RowAt at = row_at(t, r);
    const int64_t first = partial_o_offset(v.partial_o, s, t.q.b, at.i, at.h, 0);
    const int64_t step =
        p_.dim_v > 1 ? partial_o_offset(v.partial_o, s, t.q.b, at.i, at.h, 1) - first : 1;
    store_row(v.partial_o, first, step, o, p_.dim_v);
    float* lse_out = static_cast<float*>(v.partial_lse.data);
    lse_out[partial_lse_offset(v.partial_lse, s, t.q.b, at.h, at.i)] = lse;
  }

  void store_final_row(const PackedTile& t, int64_t r, const float* o, float lse) const {
    const TensorView& out = p_.args.o;
    const RowAt at = row_at(t, r);
    store_row(out, base::offset_of(out, t.q.b, at.i, at.h, 0), out.stride[3], o, p_.dim_v);
    if (p_.args.lse.given()) {
      float* lse_out = static_cast<float*>(p_.args.lse.data);
      lse_out[base::offset_of(p_.args.lse, t.q.b, at.h, at.i)] =
          float(shifted_lse(lse, lse_shift(p_, t.q.b, at.h, at.i)));
    }
  }

  // A split's result (O normalized, natural-log LSE per packed row), to wherever it belongs.
  void store_split(const PackedTile& t, int64_t s, const float* o, const float* lse) const {
    for (int64_t r = 0; r < t.rows(); ++r) {
      if (plan_.partials) {
        store_partial_row(t, s, r, o + r * dim_v_padded_, lse[r]);
      } else {
        store_final_row(t, r, o + r * dim_v_padded_, lse[r]);
      }
    }
  }

  // Fetches query row r of tile t towards the caches, when it is one contiguous run. A head's rows
  // lie a token apart, each on a page of its own, where no hardware prefetcher goes ahead.
  [[gnu::always_inline]] void prefetch_q_row(const PackedTile& t, int64_t r) const {
    const TensorView& view = p_.args.q;
    if (r >= t.rows() || view.stride[3] != 1) return;
    const RowAt at = row_at(t, r);
    const int64_t bits = bits_of(view.dtype);
    const char* row = static_cast<const char*>(view.data) +
                      base::offset_of(view, t.q.b, at.i, at.h, 0) * bits / 8;
    prefetch_lines<3>(row, (p_.dim_qk * bits + 7) / 8);
  }

  // The AMX kernels' weights: 16 bits (2 parts) against bf16 values, 24 (3) against f32 and f16,
  // but no finer than the finest O the caller gets (O, and the partials where it asked for them):
  // 8 bits (1 part, as GPU kernels keep P) for bf16, 16 for f16. A weight's rounding then moves
  // O by at most 2^-9 (2^-17) of the |V| it weights, about O's own rounding. The row sums, and so
  // the LSE, add the unrounded weights.
  int weight_parts() const {
    const auto kept = [](DType t) { return t == DType::bf16 ? 1 : t == DType::f16 ? 2 : 3; };
    const TensorView& partial_o = p_.args.split.partial_o;
    const int caller =
        std::max(kept(p_.args.o.dtype), partial_o.given() ? kept(partial_o.dtype) : 0);
    return std::min(p_.args.v.dtype == DType::bf16 ? 2 : 3, caller);
  }

  // The AMX few-row kernel's parts: Q as the AMX tiles take it (MX Q, dequantized to f32, in 3);
  // the weights as against bf16 values (FP8 values are exact in bf16); rows a block, no more than
  // a tile has (a GQA group of 4 in a decode: 4 columns of Q^T, which the kernel's scores take
  // apart with a few permutes). The blocks change no result bit.
  int row_q_parts() const {
    const int parts = bf16_parts(p_.args.q.dtype);
    return parts > 0 ? parts : kMaxBf16Parts;
  }
  int row_weight_parts() const {
    return std::min(2, weight_parts());
  }
  int64_t row_block() const {
    return std::min({kTileRows / row_q_parts(), kTileRows / 2 / row_weight_parts(),
                     std::max<int64_t>(plan_.max_rows, 1)});
  }

  // Q rows of the tile, times scale * log2(e): row-major for the few-row kernels (in even/odd
  // order for those that read K rows directly), else transposed. The AMX kernels take Q as given,
  // negated where the scale is negative (exact), as bf16 parts (bf16 Q as it is), row-major, head
  // k's in sc.bf16_queries(k, part), and scale the scores by |scale|; scores_bf16_from_rows
  // takes bf16 Q as given, in its order, and scales the scores by scale * log2(e).
  void pack_queries(const PackedTile& t, int64_t k, float* q, Scratch& sc) const {
    uint16_t* q_bf16 = sc.bf16_queries(k);
    // Rows fetched ahead of the one packed; none for the few rows of a decode tile.
    const int64_t ahead = few_rows_ ? 0 : 4;
    for (int64_t r = 0; r < ahead; ++r) prefetch_q_row(t, r);  // then row r + ahead with row r
    const int q_parts = bf16_parts(p_.args.q.dtype);
    if (amx_ && q_parts > 1) {
      uint16_t* parts[kMaxBf16Parts];
      for (int i = 0; i < q_parts; ++i) {
        parts[i] = sc.bf16_queries(k, i);
        std::fill(parts[i], parts[i] + rows_padded_ * dim_qk_padded_, uint16_t(0));
      }
      const float sign = p_.scale < 0 ? -1.0f : 1.0f;
      for (int64_t r = 0; r < t.rows(); ++r) {
        prefetch_q_row(t, r + ahead);
        const RowAt at = row_at(t, r);
        load_q_row(p_, t.q.b, at.i, at.h, sc.q_row.data());
        uint16_t* row_parts[kMaxBf16Parts];
        for (int i = 0; i < q_parts; ++i) row_parts[i] = parts[i] + r * dim_qk_padded_;
        split_bf16(sc.q_row.data(), p_.dim_qk, sign, q_parts, row_parts);
      }
      return;
    }
    if (amx_ || bf16_scores_) {
      std::fill(q_bf16, q_bf16 + rows_padded_ * dim_qk_padded_, uint16_t(0));
      const uint16_t sign = amx_ && p_.scale < 0 ? uint16_t(0x8000) : uint16_t(0);
      const RowElem key_elem = keys_.format().elem;
      const TensorView& view = p_.args.q;
      const uint16_t* data = static_cast<const uint16_t*>(view.data);
      for (int64_t r = 0; r < t.rows(); ++r) {
        if (ahead > 0) prefetch_q_row(t, r + ahead);
        const RowAt at = row_at(t, r);
        const uint16_t* row = data + base::offset_of(view, t.q.b, at.i, at.h, 0);
        uint16_t* out = q_bf16 + r * dim_qk_padded_;
        if (amx_ && view.stride[3] == 1) {
          for (int64_t d = 0; d < p_.dim_qk; ++d) out[d] = row[d] ^ sign;  // vectorized
          continue;
        }
        for (int64_t d = 0; d < p_.dim_qk; ++d) {
          const int64_t at_d = amx_ ? d : bf16_dot_position(key_elem, d);
          out[at_d] = row[d * view.stride[3]] ^ sign;
        }
      }
      return;
    }
    std::fill(q, q + rows_padded_ * dim_qk_padded_, 0.0f);
    if (row_tiles_) std::fill_n(sc.q_tiles(k), sc.q_tile_words(), uint32_t(0));
    const float factor = p_.scale * kLog2e;
    for (int64_t r = 0; r < t.rows(); ++r) {
      if (ahead > 0) prefetch_q_row(t, r + ahead);
      const RowAt at = row_at(t, r);
      load_q_row(p_, t.q.b, at.i, at.h, sc.q_row.data());
      for (int64_t d = 0; d < p_.dim_qk; ++d) {
        const float x = sc.q_row[size_t(d)] * factor;
        if (direct_) {
          const int64_t in_block = d % kDirectBlock;
          q[r * dim_qk_padded_ + d - in_block + in_block / 2 +
            (in_block % 2) * (kDirectBlock / 2)] = x;
        } else if (few_rows_) {
          q[r * dim_qk_padded_ + d] = x;
        } else {
          q[d * rows_padded_ + r] = x;
        }
      }
      if (row_tiles_) pack_q_tiles(sc, k, r);
    }
  }

  // Packed row r of head k's queries (sc.q_row, as loaded; overwritten) into the AMX few-row
  // kernel's tiles of Q^T (RowTileStep::q_tiles), as bf16 parts.
  void pack_q_tiles(Scratch& sc, int64_t k, int64_t r) const {
    const int parts = row_q_parts();
    const int64_t rb = row_block(), columns = rb * parts;
    uint16_t* split[kMaxBf16Parts];
    for (int i = 0; i < parts; ++i) split[i] = sc.q_parts_row.data() + i * dim_qk_padded_;
    split_bf16(sc.q_row.data(), p_.dim_qk, 1.0f, parts, split);  // overwrites q_row
    uint32_t* tiles = sc.q_tiles(k) + (r / rb) * (dim_qk_padded_ / 2) * columns;
    for (int i = 0; i < parts; ++i) {
      const int64_t n = (r % rb) * parts + i;
      for (int64_t d = 0; d + 1 < p_.dim_qk; d += 2) {
        tiles[(d / 2) * columns + n] = uint32_t(split[i][d]) | uint32_t(split[i][d + 1]) << 16;
      }
      if (p_.dim_qk % 2) tiles[(p_.dim_qk / 2) * columns + n] = split[i][p_.dim_qk - 1];
    }
  }

  // Packed rows [begin, end), whole vectors, outside which no row of tile t sees a key of
  // [first, last]. Rows of one head are consecutive query rows, whose visible keys move forward
  // with the row: those that see nothing here are a prefix (hi < first) and a suffix
  // (lo > last). Packs of several heads keep every row.
  struct RowRange {
    int64_t begin, end;
  };
  RowRange visible_rows(const PackedTile& t, int64_t first, int64_t last) const {
    const int64_t rows = t.rows();
    if (t.heads > 1 || few_rows_) return {0, round_up(rows, kPad)};
    int64_t begin = 0, end = rows;
    while (begin < end && t.q.vis.hi(t.q.row_first + begin) < first) ++begin;
    while (end > begin && t.q.vis.lo(t.q.row_first + end - 1) > last) --end;
    if (begin == end) return {0, 0};
    return {begin / kPad * kPad, round_up(end, kPad)};
  }

  // Where the K and V rows of keys [first, first + count) of the group's heads start.
  void locate(int64_t b, int64_t hk, int64_t heads, int64_t first, int64_t count,
              std::vector<RowSource>& key_sources, std::vector<RowSource>& value_sources) const {
    keys_.locate(b, hk, heads, first, count, key_sources.data());
    values_.locate(b, hk, heads, first, count, value_sources.data());
  }

  // One key tile of `keys` keys for every head of a group through the kernels that read rows
  // directly (all rows of the tile take part: few rows per head). Each head's calls also fetch
  // its share of the next tile's rows (next_keys keys), in memory order: head k the k-th slice
  // of the rows, which are by key, then head.
  void direct_step(Scratch& sc, int64_t heads, int64_t keys, int64_t next_keys, int64_t rows,
                   bool all_visible) const {
    const int64_t ld = split_.tile_n;
    for (int64_t k = 0; k < heads; ++k) {
      const Scratch::Head h = sc.head(k);
      const RowStream key_rows{sc.key_sources.data() + k, keys, heads,
                               sc.next_key_sources.data() + k * next_keys, next_keys};
      const RowStream value_rows{sc.value_sources.data() + k, keys, heads,
                                 sc.next_value_sources.data() + k * next_keys, next_keys};
      if (row_tiles_ && row_tile_step(sc, k, key_rows, value_rows, rows, all_visible)) continue;
      if (bf16_scores_) {
        kernels_.scores_bf16_from_rows(keys_.format(), key_rows, sc.bf16_queries(k), dim_qk_padded_,
                                       rows, p_.scale * kLog2e, sc.scores.get(), ld);
      } else {
        kernels_.scores_from_rows(keys_.format(), key_rows, h.q, dim_qk_padded_, rows,
                                  sc.scores.get(), ld);
      }
      kernels_.softmax_by_rows(sc.scores.get(), ld, rows, keys,
                               all_visible ? nullptr : sc.first.get(), sc.last.get(), h.row_max,
                               h.row_sum, h.rescale);
      kernels_.accumulate_from_rows(values_.format(), value_rows, sc.scores.get(), ld, h.rescale,
                                    rows, h.out, dim_v_padded_);
    }
  }

  // direct_step's tile for head k on the AMX few-row kernel; false where it declines the tile
  // (nothing changed).
  bool row_tile_step(Scratch& sc, int64_t k, const RowStream& key_rows, const RowStream& value_rows,
                     int64_t rows, bool all_visible) const {
    const Scratch::Head h = sc.head(k);
    RowTileStep step;
    step.key_format = &keys_.format();
    step.value_format = &values_.format();
    step.keys = key_rows;
    step.values = value_rows;
    step.q_tiles = sc.q_tiles(k);
    step.q_parts = row_q_parts();
    step.weight_parts = row_weight_parts();
    step.rows = rows;
    step.row_block = row_block();
    step.dim_qk_padded = dim_qk_padded_;
    step.dim_v_padded = dim_v_padded_;
    step.score_factor = p_.scale * kLog2e;
    step.first = all_visible ? nullptr : sc.first.get();
    step.last = sc.last.get();
    step.row_max = h.row_max;
    step.row_sum = h.row_sum;
    step.rescale = h.rescale;
    step.out = h.out;
    step.out_stride = dim_v_padded_;
    sc.row_tile.attach(step);
    return kernels_.attend_rows_bf16(step);
  }

  // One key tile of `keys` keys (located in sc) for head k of a group, packed rows
  // [r0, r0 + row_count), through the AMX kernels.
  void amx_step(Scratch& sc, int64_t k, int64_t heads, int64_t keys, int64_t r0, int64_t row_count,
                bool all_visible) const {
    const int64_t keys_padded = round_up(std::max(split_.tile_n, kAmxStepKeys), kTileBf16);
    Bf16TileStep step;
    step.q_parts = bf16_parts(p_.args.q.dtype);
    step.key_parts = bf16_parts(p_.args.k.dtype);
    step.value_parts = bf16_parts(p_.args.v.dtype);
    step.weight_parts = weight_parts();
    uint32_t* key_parts[kMaxBf16Parts] = {};
    uint32_t* value_parts[kMaxBf16Parts] = {};
    for (int i = 0; i < step.key_parts; ++i) step.keys[i] = key_parts[i] = sc.packed_keys[i].get();
    for (int i = 0; i < step.value_parts; ++i) {
      step.values[i] = value_parts[i] = sc.packed_values[i].get();
    }
    kernels_.pack_bf16_keys(keys_.format(), sc.key_sources.data() + k, heads, keys, keys_padded,
                            dim_qk_padded_, step.key_parts, key_parts);
    kernels_.pack_bf16_values(values_.format(), sc.value_sources.data() + k, heads, keys,
                              dim_v_padded_, step.value_parts, value_parts);
    const Scratch::Head h = sc.head(k);
    for (int i = 0; i < step.q_parts; ++i) step.q[i] = sc.bf16_queries(k, i) + r0 * dim_qk_padded_;
    step.q_stride = dim_qk_padded_;
    step.row_count = row_count;
    step.key_count = keys;
    step.keys_padded = keys_padded;
    step.dim_qk_padded = dim_qk_padded_;
    step.dim_v_padded = dim_v_padded_;
    step.score_scale = std::fabs(p_.scale) * kLog2e;  // Q comes negated for a negative scale
    step.first = all_visible ? nullptr : sc.first.get() + r0;
    step.last = sc.last.get() + r0;
    step.row_max = h.row_max + r0;
    step.row_sum = h.row_sum + r0;
    step.rescale = h.rescale + r0;
    step.out = h.out + r0 * dim_v_padded_;
    step.out_stride = dim_v_padded_;
    step.scores = sc.block_scores.get();
    for (int i = 0; i < step.weight_parts; ++i) step.weights[i] = sc.weights[i].get();
    kernels_.attend_bf16(step);
  }

  // Keys [first, last] of key-tile position pos of tile t that some row of it sees; none when
  // last < first. Keys outside [lo(first row), hi(last row)] are seen by no row of the tile.
  struct KeySpan {
    int64_t first = 0, last = -1;
  };
  KeySpan key_span(const PackedTile& t, int64_t pos) const {
    const int64_t tile_first = t.q.key_tile(pos) * split_.tile_n;
    return {std::max(tile_first, t.q.vis.lo(t.q.row_first)),
            std::min(tile_first + split_.tile_n - 1, t.q.vis.hi(t.q.row_last))};
  }

  // The first position of [pos, end) whose key span has a key some row of t sees; end if none.
  int64_t next_visible(const PackedTile& t, int64_t pos, int64_t end) const {
    while (pos < end && key_span(t, pos).last < key_span(t, pos).first) ++pos;
    return pos;
  }

  // Runs `item`; `following`, the item this thread takes next (or null), has its first tile
  // fetched during this item's last, where the direct-row kernels run and its group has as many
  // heads.
  void run_item(const WorkItem& item, Scratch& sc, const WorkItem* following) const {
    const TileGroup& g = plan_.groups[size_t(item.group)];
    // The tiles of a group differ only in their heads.
    const PackedTile& lead = plan_.tiles[size_t(g.first)];
    const core::Visibility& vis = lead.q.vis;
    const int64_t rows = lead.rows();
    const int64_t tile_rows = lead.q.row_last - lead.q.row_first + 1;
    for (int64_t k = 0; k < g.count; ++k) {
      const Scratch::Head h = sc.head(k);
      pack_queries(plan_.tiles[size_t(g.first + k)], k, h.q, sc);
      std::fill(h.out, h.out + rows_padded_ * dim_v_padded_, 0.0f);
      std::fill(h.row_max, h.row_max + rows_padded_, -INFINITY);
      std::fill(h.row_sum, h.row_sum + rows_padded_, 0.0f);
    }
    // Keys no row of the tile sees are never read.
    const auto span_at = [&](int64_t pos) { return key_span(lead, pos); };
    const int64_t end = item.first + item.count;
    const int64_t heads = g.count;
    const int64_t b = lead.q.b, hk = lead.kv_head;
    // The kernels that read rows directly also fetch the rows of the next tile: its sources are
    // located one tile ahead, in the second pair of buffers.
    int64_t located = -1;  // the position whose rows the current buffers hold
    for (int64_t pos = item.first; pos < end; ++pos) {
      auto [first, last] = span_at(pos);
      if (last < first) continue;
      while (amx_ && pos + 1 < end) {
        const KeySpan next = span_at(pos + 1);
        if (next.first != last + 1 || next.last - first + 1 > kAmxStepKeys) break;
        last = next.last;
        ++pos;
      }
      const int64_t keys = last - first + 1;
      // Bounds are monotone in the row, so the first row's hi and the last row's lo decide whether
      // every row sees the whole key range.
      const bool all_visible = vis.lo(lead.q.row_last) <= first && vis.hi(lead.q.row_first) >= last;
      // Rows outside `range` see no key of this tile and are left out: for them the step would
      // change nothing (their weights are all 0 and the rescale is 1).
      const RowRange range = visible_rows(lead, first, last);
      if (range.begin >= range.end) continue;
      if (!all_visible) {
        for (int64_t r = range.begin; r < range.end; ++r) {
          const int64_t i = lead.q.row_first + (r < rows ? r % tile_rows : 0);
          sc.first[r] = float(std::clamp<int64_t>(vis.lo(i) - first, -1, keys));
          sc.last[r] = float(std::clamp<int64_t>(vis.hi(i) - first, -1, keys));
        }
      }
      if (direct_) {
        if (located != pos) locate(b, hk, heads, first, keys, sc.key_sources, sc.value_sources);
        // next_keys: keys of this item's next tile; fetch_keys: those the step fetches, the
        // next tile's or, after the last, the first tile of the following item (fetched only:
        // that item locates its own rows again).
        const int64_t next_pos = next_visible(lead, pos + 1, end);
        int64_t next_keys = 0, fetch_keys = 0;
        if (next_pos < end) {
          const KeySpan next = span_at(next_pos);
          next_keys = fetch_keys = next.last - next.first + 1;
          locate(b, hk, heads, next.first, next_keys, sc.next_key_sources, sc.next_value_sources);
        } else if (following != nullptr && plan_.groups[size_t(following->group)].count == heads) {
          const PackedTile& fl = plan_.tiles[size_t(plan_.groups[size_t(following->group)].first)];
          const int64_t fpos =
              next_visible(fl, following->first, following->first + following->count);
          if (fpos < following->first + following->count) {
            const KeySpan next = key_span(fl, fpos);
            fetch_keys = next.last - next.first + 1;
            locate(fl.q.b, fl.kv_head, heads, next.first, fetch_keys, sc.next_key_sources,
                   sc.next_value_sources);
          }
        }
        direct_step(sc, heads, keys, fetch_keys, rows, all_visible);
        if (next_keys > 0) {
          std::swap(sc.key_sources, sc.next_key_sources);
          std::swap(sc.value_sources, sc.next_value_sources);
          located = next_pos;
        }
        continue;
      }
      const int64_t r0 = range.begin, row_count = range.end - range.begin;
      if (amx_) {
        locate(b, hk, heads, first, keys, sc.key_sources, sc.value_sources);
        for (int64_t k = 0; k < heads; ++k) {
          amx_step(sc, k, heads, keys, r0, row_count, all_visible);
        }
        continue;
      }
      // A tile's K and V rows: where they lie, or gathered into scratch as f32 rows, key by key
      // and head by head. Few rows (decode) read each row once: gathered in memory order, which
      // the hardware prefetchers follow, the rows of a head a whole token apart are not.
      const float* key_rows = few_rows_ ? nullptr : keys_.in_place(b, hk, first, dim_qk_padded_);
      int64_t key_stride = keys_.key_step(), key_head_step = keys_.head_step();
      if (key_rows == nullptr) {
        keys_.gather(kernels_, b, hk, heads, first, keys, sc.key_sources.data(), sc.keys.get(),
                     dim_qk_padded_);
        key_rows = sc.keys.get();
        key_stride = heads * dim_qk_padded_;
        key_head_step = dim_qk_padded_;
      }
      const float* value_rows = few_rows_ ? nullptr : values_.in_place(b, hk, first, dim_v_padded_);
      int64_t value_stride = values_.key_step(), value_head_step = values_.head_step();
      if (value_rows == nullptr) {
        values_.gather(kernels_, b, hk, heads, first, keys, sc.value_sources.data(),
                       sc.values.get(), dim_v_padded_);
        value_rows = sc.values.get();
        value_stride = heads * dim_v_padded_;
        value_head_step = dim_v_padded_;
      }
      for (int64_t k = 0; k < heads; ++k) {
        const Scratch::Head h = sc.head(k);
        float* scores = sc.scores.get() + r0;
        if (few_rows_) {
          kernels_.scores_by_dim_lanes(key_rows + k * key_head_step, key_stride, keys, h.q, rows,
                                       dim_qk_padded_, sc.scores.get(), rows_padded_);
        } else {
          kernels_.scores_by_row_lanes(key_rows + k * key_head_step, key_stride, keys, h.q + r0,
                                       rows_padded_, row_count, dim_qk_padded_, scores);
        }
        kernels_.softmax_step(scores, rows_padded_, row_count, keys,
                              all_visible ? nullptr : sc.first.get() + r0, sc.last.get() + r0,
                              h.row_max + r0, h.row_sum + r0, h.rescale + r0);
        kernels_.accumulate_values(scores, rows_padded_, keys, value_rows + k * value_head_step,
                                   value_stride, dim_v_padded_, h.rescale + r0,
                                   std::min(rows, range.end) - r0, h.out + r0 * dim_v_padded_,
                                   dim_v_padded_);
      }
    }
    for (int64_t k = 0; k < g.count; ++k) {
      const Scratch::Head h = sc.head(k);
      normalize(rows, h);
      if (item.pieces == 1) {
        store_split(plan_.tiles[size_t(g.first + k)], item.split, h.out, h.lse);
        continue;
      }
      const int64_t slot = item.piece_base + k * item.pieces + item.piece;
      std::copy(h.out, h.out + rows * dim_v_padded_,
                piece_o_.get() + slot * plan_.max_rows * dim_v_padded_);
      std::copy(h.lse, h.lse + rows, piece_lse_.get() + slot * plan_.max_rows);
    }
  }

  // O /= sum and LSE = ln(sum exp(s)), from the log2-domain state; a row that saw no key gets 0
  // and -inf without touching what was accumulated.
  void normalize(int64_t rows, const Scratch::Head& h) const {
    for (int64_t r = 0; r < rows; ++r) {
      float* o = h.out + r * dim_v_padded_;
      const float sum = h.row_sum[r];
      if (sum == 0.0f) {
        std::fill(o, o + p_.dim_v, 0.0f);
        h.lse[r] = -INFINITY;
        continue;
      }
      const float inverse = 1.0f / sum;
      for (int64_t d = 0; d < p_.dim_v; ++d) o[d] *= inverse;
      h.lse[r] = (h.row_max[r] + std::log2(sum)) * kLn2;
    }
  }

  // The pieces of one split, merged with spec §3's algebra into the split's result, tile by tile.
  void merge_pieces(const PieceMerge& m, Scratch& sc) const {
    const TileGroup& g = plan_.groups[size_t(m.group)];
    const Scratch::Head h = sc.head(0);
    std::vector<float> weights(size_t(m.pieces));
    for (int64_t k = 0; k < g.count; ++k) {
      const PackedTile& t = plan_.tiles[size_t(g.first + k)];
      const int64_t first_slot = m.piece_base + k * m.pieces;
      for (int64_t r = 0; r < t.rows(); ++r) {
        auto piece_lse = [&](int64_t piece) {
          return piece_lse_[size_t((first_slot + piece) * plan_.max_rows + r)];
        };
        const core::MergeScale st = core::merge_weights(m.pieces, piece_lse, weights.data());
        const float divisor = core::merge_divisor(st.sum);
        float* o = h.out + r * dim_v_padded_;
        std::fill(o, o + p_.dim_v, 0.0f);
        for (int64_t piece = 0; piece < m.pieces; ++piece) {
          const float* src =
              piece_o_.get() + ((first_slot + piece) * plan_.max_rows + r) * dim_v_padded_;
          for (int64_t d = 0; d < p_.dim_v; ++d) o[d] += weights[size_t(piece)] * src[d];
        }
        for (int64_t d = 0; d < p_.dim_v; ++d) o[d] /= divisor;
        h.lse[r] = core::merge_lse(st.m, st.sum);
      }
      store_split(t, m.split, h.out, h.lse);
    }
  }

  const FastKernels& kernels_;
  const core::Problem& p_;
  core::SplitParams split_;
  int threads_;
  Plan plan_;
  RowGather keys_, values_;
  bool few_rows_;  // scores_by_dim_lanes, with Q packed row-major
  // The few-row kernels that read K and V rows directly, where the set has them and takes both.
  bool direct_;
  // Scores as bf16 dot products of the queries as given, where the set has them and Q is bf16.
  bool bf16_scores_;
  // The many-row kernels of the AMX tile unit, where the set has them and Q, K, V are bf16.
  bool amx_;
  // The few-row tiles run on the AMX kernel (attend_rows_bf16), the FMA ones where it declines.
  bool row_tiles_;
  int64_t rows_padded_, dim_qk_padded_, dim_v_padded_;
  const CombineArgs* partial_views_ = nullptr;
  Floats piece_o_, piece_lse_;
};

}  // namespace

void run_fast_with(SimdIsa isa, const core::Problem& p, const core::SplitParams& split, int threads,
                   RowTiles row_tiles) {
  FastEngine(isa, row_tiles, p, split, threads).run();
}

}  // namespace mxattn::cpu
