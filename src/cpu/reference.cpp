// The reference engine: f64 plain loops over exactly dequantized inputs, written to be obviously
// right rather than fast. Every other engine is checked against it, split by split.
//
// The whole computation is one function, `attend_split`: the softmax of each row of a query tile
// over the keys of one split that the row sees. Unsplit attention is the same function with one
// split.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/plan.h"
#include "cpu/engines.h"
#include "cpu/partials.h"
#include "cpu/rows.h"

namespace mxattn::cpu {
namespace {

// Per-thread buffers of one row's computation.
struct Scratch {
  explicit Scratch(const core::Problem& p)
      : q(size_t(p.dim_qk)), k(size_t(p.dim_qk)), v(size_t(p.dim_v)), o(size_t(p.dim_v)) {}
  std::vector<float> q, k, v;
  std::vector<double> o;
  std::vector<int64_t> keys;
  std::vector<double> scores;
};

// The keys of the split's key tiles that row i sees, in increasing order. The tiles already hold
// only listed sparse blocks, and visibility never reaches past kv_len, so nothing else is read.
void gather_keys(const core::QueryTile& tile, core::TileRun split, int64_t tile_n, int64_t i,
                 std::vector<int64_t>& keys) {
  keys.clear();
  for (int64_t pos = split.begin; pos < split.begin + split.count; ++pos) {
    const int64_t first = tile.key_tile(pos) * tile_n;
    for (int64_t j = first; j < first + tile_n; ++j) {
      if (tile.vis.visible(i, j)) keys.push_back(j);
    }
  }
}

// The largest score; NaN when any score is NaN, so that it propagates.
double max_score(const std::vector<double>& scores) {
  double m = -INFINITY;
  for (double s : scores) {
    if (std::isnan(s)) return s;
    if (s > m) m = s;
  }
  return m;
}

// Softmax of row i of `tile` over the keys of `split` it sees: sc.o = O_s (normalized by its own
// sum), returns L_s (natural log). No key: O_s = 0 and L_s = -inf.
double attend_row(const core::Problem& p, const core::QueryTile& tile, core::TileRun split,
                  int64_t tile_n, int64_t i, Scratch& sc) {
  const int64_t b = tile.b, h = tile.h, hk = h / p.group;
  for (double& x : sc.o) x = 0.0;
  gather_keys(tile, split, tile_n, i, sc.keys);
  if (sc.keys.empty()) return -INFINITY;

  load_q_row(p, b, i, h, sc.q.data());
  sc.scores.clear();
  for (int64_t j : sc.keys) {
    load_k_row(p, b, j, hk, sc.k.data());
    double dot = 0.0;
    for (int64_t d = 0; d < p.dim_qk; ++d) dot += double(sc.q[d]) * double(sc.k[d]);
    sc.scores.push_back(double(p.scale) * dot);
  }

  const double m = max_score(sc.scores);
  double sum = 0.0;
  for (size_t n = 0; n < sc.keys.size(); ++n) {
    const double weight = std::exp(sc.scores[n] - m);
    sum += weight;
    load_v_row(p, b, sc.keys[n], hk, sc.v.data());
    for (int64_t d = 0; d < p.dim_v; ++d) sc.o[d] += weight * double(sc.v[d]);
  }
  for (double& x : sc.o) x /= sum;
  return m + std::log(sum);
}

// Split s of a query tile, row by row; `store(i, o, lse)` receives each row's O_s and L_s.
template <class Store>
void attend_split(const core::Problem& p, const core::SplitParams& sp, const core::QueryTile& tile,
                  int64_t s, Scratch& sc, Store store) {
  const core::TileRun split = core::split_tiles(tile.run, tile.splits, s);
  for (int64_t i = tile.row_first; i <= tile.row_last; ++i) {
    const double lse = attend_row(p, tile, split, sp.tile_n, i, sc);
    store(i, sc.o, lse);
  }
}

// Runs `body(tile, scratch)` over every query tile of the plan, tiles spread over threads.
template <class Body>
void for_each_tile(const core::Problem& p, const core::SplitParams& sp, Body body) {
  const int64_t per_head = core::query_tiles_per_head(p, sp);
  const int64_t tiles = p.batch * p.heads_q * per_head;
#pragma omp parallel
  {
    Scratch sc(p);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t b = t / (p.heads_q * per_head), h = (t / per_head) % p.heads_q;
      body(core::query_tile(p, sp, b, h, t % per_head), sc);
    }
  }
}

void store_counts(const core::QueryTile& tile, const TensorView& counts) {
  if (!counts.given()) return;
  for (int64_t i = tile.row_first; i <= tile.row_last; ++i) {
    store_count(counts, tile.b, tile.h, i, tile.count);
  }
}

// One split per tile and no partials asked for: rows go straight to O and LSE.
void run_unsplit(const core::Problem& p, const core::SplitParams& sp) {
  const AttentionArgs& a = p.args;
  for_each_tile(p, sp, [&](const core::QueryTile& tile, Scratch& sc) {
    store_counts(tile, a.split.counts);
    attend_split(p, sp, tile, 0, sc, [&](int64_t i, const std::vector<double>& o, double lse) {
      for (int64_t d = 0; d < p.dim_v; ++d) {
        base::store_float(a.o, base::offset_of(a.o, tile.b, i, tile.h, d), float(o[size_t(d)]));
      }
      if (a.lse.given()) {
        static_cast<float*>(a.lse.data)[base::offset_of(a.lse, tile.b, tile.h, i)] =
            float(shifted_lse(lse, lse_shift(p, tile.b, tile.h, i)));
      }
    });
  });
}

// Every split of every tile into the partials (the caller's or our own), then the spec §3 combine.
void run_split(const core::Problem& p, const core::SplitParams& sp) {
  const PartialStore store(p, core::partial_slots(p, sp));
  const CombineArgs& views = store.views();
  for_each_tile(p, sp, [&](const core::QueryTile& tile, Scratch& sc) {
    store_counts(tile, views.counts);
    const int64_t written = sp.early_exit ? tile.count : tile.splits;
    for (int64_t s = 0; s < written; ++s) {
      attend_split(p, sp, tile, s, sc, [&](int64_t i, const std::vector<double>& o, double lse) {
        const TensorView& po = views.partial_o;
        for (int64_t d = 0; d < p.dim_v; ++d) {
          base::store_float(po, partial_o_offset(po, s, tile.b, i, tile.h, d), float(o[size_t(d)]));
        }
        const TensorView& pl = views.partial_lse;
        static_cast<float*>(pl.data)[partial_lse_offset(pl, s, tile.b, tile.h, i)] = float(lse);
      });
    }
  });
  combine_partials(views, 0,
                   [&](int64_t b, int64_t h, int64_t i) { return float(lse_shift(p, b, h, i)); });
}

}  // namespace

void run_reference(const core::Problem& p, const core::SplitParams& split) {
  const SplitOptions& o = p.args.split;
  if (split.split_kv == 1 && !o.partial_o.given() && !o.partial_lse.given()) {
    run_unsplit(p, split);
  } else {
    run_split(p, split);
  }
}

}  // namespace mxattn::cpu
