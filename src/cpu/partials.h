// Split-KV partials on the CPU: where O_s, L_s and the per-row counts live, the spec §3 combine
// over them, and the K-smoothing LSE shift. Shared by the reference and the fast engine, so both
// combine exactly the same way.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "base/host_tensor.h"
#include "core/combine.h"
#include "core/problem.h"
#include "cpu/rows.h"
#include "mxattn/combine.h"

namespace mxattn::cpu {

// Element offsets in the partial layouts: O_s [S, B, Sq, Hq, Dv] and L_s [S, B, Hq, Sq].
inline int64_t partial_o_offset(const TensorView& v, int64_t s, int64_t b, int64_t i, int64_t h,
                                int64_t d) {
  return s * v.stride[0] + b * v.stride[1] + i * v.stride[2] + h * v.stride[3] + d * v.stride[4];
}
inline int64_t partial_lse_offset(const TensorView& v, int64_t s, int64_t b, int64_t h, int64_t i) {
  return base::offset_of(v, s, b, h, i);
}

// Threads for an OpenMP region: 0 asks for all of them.
inline int thread_count(int threads) {
  return threads > 0 ? threads : omp_get_max_threads();
}

// The partial views an engine writes and the combine reads: the caller's when given, else f32
// buffers owned here (contiguous), so an engine never needs to know which.
class PartialStore {
 public:
  PartialStore(const core::Problem& p, int64_t slots) {
    const SplitOptions& o = p.args.split;
    partials_.partial_o = o.partial_o.given()
                              ? o.partial_o
                              : own(own_o_, {slots, p.batch, p.seq_q, p.heads_q, p.dim_v});
    partials_.partial_lse =
        o.partial_lse.given() ? o.partial_lse : own(own_lse_, {slots, p.batch, p.heads_q, p.seq_q});
    partials_.counts =
        o.counts.given() ? o.counts : own(own_counts_, DType::i32, {p.batch, p.heads_q, p.seq_q});
    partials_.o = p.args.o;
    partials_.lse = p.args.lse;
  }

  // Partials, counts and the problem's outputs, ready for combine_partials.
  const CombineArgs& views() const { return partials_; }

 private:
  static TensorView own(base::HostTensor& t, std::initializer_list<int64_t> shape) {
    return own(t, DType::f32, shape);
  }
  static TensorView own(base::HostTensor& t, DType dtype, std::initializer_list<int64_t> shape) {
    t = base::HostTensor(dtype, shape);
    return t.view();
  }

  base::HostTensor own_o_, own_lse_, own_counts_;
  CombineArgs partials_;
};

// Writes the exact split count of row i of (b, h).
inline void store_count(const TensorView& counts, int64_t b, int64_t h, int64_t i, int64_t count) {
  static_cast<int32_t*>(counts.data)[base::offset_of(counts, b, h, i)] = int32_t(count);
}

// K smoothing (spec §5): the LSE of row i of (b, h) is shifted by scale * dot(q, k_mean[b, h / g]),
// in f64 over the dequantized q. 0 without k_mean.
inline double lse_shift(const core::Problem& p, int64_t b, int64_t h, int64_t i) {
  const TensorView& km = p.args.k_mean;
  if (!km.given()) return 0.0;
  std::vector<float> q(size_t(p.dim_qk));
  load_q_row(p, b, i, h, q.data());
  const float* mean = static_cast<const float*>(km.data);
  const int64_t hk = h / p.group;
  double dot = 0.0;
  for (int64_t d = 0; d < p.dim_qk; ++d) dot += double(q[d]) * mean[base::offset_of(km, b, hk, d)];
  return double(p.scale) * dot;
}

// An empty row's LSE stays -inf whatever the shift (a NaN q must not leak into a masked row).
inline double shifted_lse(double lse, double shift) {
  return lse == -INFINITY ? lse : lse + shift;
}

// spec §3 combine of every row, reading only splits below the row's count. `shift_at(b, h, i)`
// gives the f32 amount added to the row's combined LSE (K smoothing), applied once, after the
// merge.
template <class ShiftAt>
void combine_partials(const CombineArgs& a, int threads, ShiftAt shift_at) {
  const TensorView& po = a.partial_o;
  const TensorView& pl = a.partial_lse;
  const int64_t slots = po.shape[0], batch = po.shape[1], seq_q = po.shape[2];
  const int64_t heads = po.shape[3], dim_v = po.shape[4];
  const float* lse_in = static_cast<const float*>(pl.data);
  const int64_t rows = batch * seq_q * heads;
#pragma omp parallel num_threads(thread_count(threads))
  {
    std::vector<float> weights(static_cast<size_t>(slots));
    std::vector<float> acc(static_cast<size_t>(dim_v));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r % heads, i = (r / heads) % seq_q, b = r / (heads * seq_q);
      const int64_t count = base::read_i32(a.counts, base::offset_of(a.counts, b, h, i));
      const core::MergeScale st = core::merge_weights(
          count, [&](int64_t s) { return lse_in[partial_lse_offset(pl, s, b, h, i)]; },
          weights.data());
      for (int64_t d = 0; d < dim_v; ++d) acc[d] = 0.0f;
      for (int64_t s = 0; s < count; ++s) {
        for (int64_t d = 0; d < dim_v; ++d) {
          acc[d] += weights[s] * load_plain(po, partial_o_offset(po, s, b, i, h, d));
        }
      }
      const float divisor = core::merge_divisor(st.sum);
      for (int64_t d = 0; d < dim_v; ++d) {
        base::store_float(a.o, base::offset_of(a.o, b, i, h, d), acc[d] / divisor);
      }
      if (a.lse.given()) {
        const float lse = core::merge_lse(st.m, st.sum);
        static_cast<float*>(a.lse.data)[base::offset_of(a.lse, b, h, i)] =
            lse == -INFINITY ? lse : lse + shift_at(b, h, i);
      }
    }
  }
}

inline void combine_partials(const CombineArgs& a, int threads) {
  combine_partials(a, threads, [](int64_t, int64_t, int64_t) { return 0.0f; });
}

}  // namespace mxattn::cpu
