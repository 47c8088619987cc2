#include "workload/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

#include "core/problem.h"

namespace mxattn::workload {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// N(0, 1) values that depend only on (seed, stream, index): the same whatever the thread count.
void fill_normal(float* x, int64_t n, uint64_t seed, uint64_t stream) {
  const uint64_t key = splitmix64(seed * 0x100000001b3ull + stream);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 2) {
    const uint64_t r = splitmix64(key ^ uint64_t(i));
    const double u1 = (double((r >> 11) & 0x1fffffull) + 1.0) / 2097153.0;  // (0, 1]
    const double u2 = double(r >> 43) / 2097152.0;                          // [0, 1)
    const double radius = std::sqrt(-2.0 * std::log(u1));
    x[i] = float(radius * std::cos(6.283185307179586 * u2));
    if (i + 1 < n) x[i + 1] = float(radius * std::sin(6.283185307179586 * u2));
  }
}

// Per-batch values from a list of one entry (broadcast) or one per batch entry.
int32_t per_batch(const std::vector<int32_t>& values, int64_t b) {
  return values.size() == 1 ? values[0] : values[size_t(b)];
}

// Stores an f32 tensor in a plain float type, or quantizes it to an MX type along `axis`.
Status store(const base::HostTensor& src, DType format, ScaleMode mode, int axis,
             const std::vector<int64_t>& scale_shape, const std::vector<int>& scale_order,
             base::HostTensor* data, base::HostTensor* scales) {
  std::vector<int64_t> shape(src.view().shape, src.view().shape + src.view().rank);
  *data = base::HostTensor(format, shape);
  if (!is_mx(format)) {
    for (int64_t i = 0; i < src.numel(); ++i) {
      base::store_float(data->view(), i, src.data<float>()[i]);
    }
    return Status::ok();
  }
  *scales = base::HostTensor(DType::e8m0, scale_shape);
  TensorView scale_view = scales->view();
  if (!scale_order.empty()) {
    scale_view =
        permuted(scale_view, {scale_order[0], scale_order[1], scale_order[2], scale_order[3]});
  }
  return quantize(src.view(), data->view(), scale_view, axis, mode);
}

// Copies token rows (all heads) of a dense [B, Sk, H, D] tensor into pages [P, ps, H, D].
void scatter_token_rows(const base::HostTensor& dense, const base::HostTensor& pool,
                        const std::vector<int32_t>& table, int64_t max_pages, int64_t page_size) {
  const TensorView& d = dense.view();
  const int64_t row_bytes = *contiguous_bytes(d.dtype, d.shape[2] * d.shape[3]);
  const auto* src = static_cast<const std::byte*>(d.data);
  auto* dst = static_cast<std::byte*>(pool.view().data);
  for (int64_t b = 0; b < d.shape[0]; ++b) {
    for (int64_t j = 0; j < d.shape[1]; ++j) {
      const int64_t page = table[size_t(b * max_pages + j / page_size)];
      std::memcpy(dst + (page * page_size + j % page_size) * row_bytes,
                  src + (b * d.shape[1] + j) * row_bytes, size_t(row_bytes));
    }
  }
}

}  // namespace

Status Workload::build(const Config& c, Workload* w, const Inputs& inputs) {
  if (c.batch < 1 || c.seq_q < 1 || c.seq_k < 1 || c.heads_kv < 1 || c.heads_q < 1 ||
      c.dim_qk < 1 || c.dim_v < 1) {
    return Status::invalid("workload: every size must be at least 1");
  }
  for (const auto* list : {&c.kv_len, &c.prefix_offset}) {
    if (!list->empty() && list->size() != 1 && int64_t(list->size()) != c.batch) {
      return Status::invalid("workload: per-batch lists need one value or one per batch entry (" +
                             std::to_string(c.batch) + ")");
    }
  }
  if (c.causal == Causal::prefix && c.prefix_offset.empty()) {
    return Status::invalid("workload: causal prefix needs prefix offsets");
  }
  w->config_ = c;
  const int64_t B = c.batch, Sq = c.seq_q, Sk = c.seq_k, Hq = c.heads_q, Hkv = c.heads_kv;
  const int64_t Dqk = c.dim_qk, Dv = c.dim_v;

  w->q_src_ = base::HostTensor(DType::f32, {B, Sq, Hq, Dqk});
  w->k_src_ = base::HostTensor(DType::f32, {B, Sk, Hkv, Dqk});
  w->v_src_ = base::HostTensor(DType::f32, {B, Sk, Hkv, Dv});
  const struct {
    const TensorView* given;
    base::HostTensor* dst;
    const char* name;
  } sources[] = {
      {inputs.q, &w->q_src_, "Q"}, {inputs.k, &w->k_src_, "K"}, {inputs.v, &w->v_src_, "V"}};
  for (uint64_t stream = 0; stream < 3; ++stream) {
    const auto& [given, dst, name] = sources[stream];
    if (given == nullptr) {
      fill_normal(dst->data<float>(), dst->numel(), c.seed, stream + 1);
      continue;
    }
    const TensorView& want = dst->view();
    bool same = given->rank == want.rank && is_plain_float(given->dtype);
    for (int i = 0; same && i < want.rank; ++i) same = given->shape[i] == want.shape[i];
    if (!same) {
      return Status::invalid(std::string("workload: ") + name +
                             " input must be f32, f16 or bf16 of shape " + want.shape_string() +
                             ", found " + std::string(name_of(given->dtype)) + " " +
                             given->shape_string());
    }
    for (int64_t i = 0; i < dst->numel(); ++i) dst->data<float>()[i] = base::load_float(*given, i);
  }
  if (c.k_outlier != 0) {
    // A few channels of every key carry a large common offset, as real keys do.
    float* k = w->k_src_.data<float>();
    for (int64_t row = 0; row < B * Sk * Hkv; ++row) {
      for (int64_t d = 0; d + 3 < Dqk; d += 32) k[row * Dqk + d + 3] += c.k_outlier;
    }
  }

  // Kv lengths first: smoothing averages over the valid keys only.
  AttentionArgs& a = w->args_;
  a = AttentionArgs{};
  if (!c.kv_len.empty()) {
    w->kv_len_ = base::HostTensor(DType::i32, {B});
    for (int64_t b = 0; b < B; ++b) w->kv_len_.data<int32_t>()[b] = per_batch(c.kv_len, b);
    a.kv_len = w->kv_len_.view();
  }

  // What the producer stores: optionally rotated and smoothed, then quantized.
  base::HostTensor q_work(DType::f32, {B, Sq, Hq, Dqk});
  base::HostTensor k_work(DType::f32, {B, Sk, Hkv, Dqk});
  std::memcpy(q_work.view().data, w->q_src_.view().data, size_t(w->q_src_.bytes()));
  std::memcpy(k_work.view().data, w->k_src_.view().data, size_t(w->k_src_.bytes()));
  if (c.hadamard) {
    if (Status st = hadamard_rotate(q_work.view()); !st) return st;
    if (Status st = hadamard_rotate(k_work.view()); !st) return st;
  }
  if (c.smooth_k) {
    w->k_mean_ = base::HostTensor(DType::f32, {B, Hkv, Dqk});
    if (Status st = smooth_keys(k_work.view(), a.kv_len, w->k_mean_.view()); !st) return st;
    a.k_mean = w->k_mean_.view();
  }

  const auto blocks = [](int64_t n) { return (n + kMxBlock - 1) / kMxBlock; };
  if (Status st = store(q_work, c.q_format, c.scale_mode, 3, {B, Sq, Hq, Dqk / kMxBlock}, {},
                        &w->q_, &w->q_scales_);
      !st) {
    return st;
  }
  base::HostTensor k_dense, k_scales_dense, v_dense, v_scales_dense;
  if (Status st = store(k_work, c.k_format, c.scale_mode, 3, {B, Sk, Hkv, Dqk / kMxBlock}, {},
                        &k_dense, &k_scales_dense);
      !st) {
    return st;
  }
  const bool v_keys = c.v_scale_axis == VScaleAxis::keys;
  if (Status st = v_keys ? store(w->v_src_, c.v_format, c.scale_mode, 1, {B, Hkv, blocks(Sk), Dv},
                                 {0, 2, 1, 3}, &v_dense, &v_scales_dense)
                         : store(w->v_src_, c.v_format, c.scale_mode, 3,
                                 {B, Sk, Hkv, Dv / kMxBlock}, {}, &v_dense, &v_scales_dense);
      !st) {
    return st;
  }

  // Everything past kv_len is poisoned (all bits set: NaN in every float type, NaN scales), so an
  // engine that reads it shows.
  const auto poison_tail = [&](base::HostTensor& t) {
    if (!t.view().given() || c.kv_len.empty()) return;
    const int64_t row_bytes =
        *contiguous_bytes(t.view().dtype, t.view().shape[2] * t.view().shape[3]);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = per_batch(c.kv_len, b);
      auto* base = static_cast<std::byte*>(t.view().data) + (b * Sk + len) * row_bytes;
      std::memset(base, 0xff, size_t((Sk - len) * row_bytes));
    }
  };
  poison_tail(k_dense);
  poison_tail(k_scales_dense);
  poison_tail(v_dense);
  if (!v_keys) poison_tail(v_scales_dense);

  a.q = w->q_.view();
  a.q_scales = w->q_scales_.view();
  a.v_scale_axis = c.v_scale_axis;
  if (c.page_size > 0) {
    const int64_t ps = c.page_size;
    const int64_t max_pages = (Sk + ps - 1) / ps;
    const int64_t spare = 2;  // pages no table lists: poisoned, never read
    const int64_t pages = B * max_pages + spare;
    std::vector<int32_t> order(static_cast<size_t>(pages));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(c.seed ^ 0x5eedull);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int32_t> table(order.begin(), order.begin() + B * max_pages);
    w->block_table_ = base::HostTensor(DType::i32, {B, max_pages});
    std::copy(table.begin(), table.end(), w->block_table_.data<int32_t>());

    const auto make_pool = [&](const base::HostTensor& dense, base::HostTensor* pool) {
      *pool = base::HostTensor(dense.view().dtype,
                               {pages, ps, dense.view().shape[2], dense.view().shape[3]});
      std::memset(pool->view().data, 0xff, size_t(pool->bytes()));
      scatter_token_rows(dense, *pool, table, max_pages, ps);
    };
    make_pool(k_dense, &w->k_);
    make_pool(v_dense, &w->v_);
    if (k_scales_dense.view().given()) make_pool(k_scales_dense, &w->k_scales_);
    if (v_scales_dense.view().given()) {
      if (!v_keys) {
        make_pool(v_scales_dense, &w->v_scales_);
      } else {
        if (ps % kMxBlock != 0) {
          return Status::invalid(
              "workload: V scales along the keys need a page size that is a multiple of 32");
        }
        // [B, Hkv, nb, Dv] blocks of 32 keys -> [pages, Hkv, ps / 32, Dv].
        const int64_t per_page = ps / kMxBlock, nb = blocks(Sk);
        w->v_scales_ = base::HostTensor(DType::e8m0, {pages, Hkv, per_page, Dv});
        std::memset(w->v_scales_.view().data, 0xff, size_t(w->v_scales_.bytes()));
        const auto* src = v_scales_dense.data<uint8_t>();
        auto* dst = w->v_scales_.data<uint8_t>();
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < Hkv; ++h)
            for (int64_t blk = 0; blk < nb; ++blk) {
              const int64_t page = table[size_t(b * max_pages + blk / per_page)];
              std::memcpy(dst + ((page * Hkv + h) * per_page + blk % per_page) * Dv,
                          src + ((b * Hkv + h) * nb + blk) * Dv, size_t(Dv));
            }
      }
    }
    a.paged.page_size = ps;
    a.paged.block_table = w->block_table_.view();
  } else {
    w->k_ = std::move(k_dense);
    w->v_ = std::move(v_dense);
    w->k_scales_ = std::move(k_scales_dense);
    w->v_scales_ = std::move(v_scales_dense);
  }
  a.k = w->k_.view();
  a.v = w->v_.view();
  a.k_scales = w->k_scales_.view();
  a.v_scales = w->v_scales_.view();

  w->o_ = base::HostTensor(c.o_format, {B, Sq, Hq, Dv});
  a.o = w->o_.view();
  if (c.return_lse) {
    w->lse_ = base::HostTensor(DType::f32, {B, Hq, Sq});
    a.lse = w->lse_.view();
  }

  a.causal = c.causal;
  if (!c.prefix_offset.empty()) {
    w->prefix_offset_ = base::HostTensor(DType::i32, {B});
    for (int64_t b = 0; b < B; ++b)
      w->prefix_offset_.data<int32_t>()[b] = per_batch(c.prefix_offset, b);
    a.prefix_offset = w->prefix_offset_.view();
  }
  a.window = c.window;

  if (inputs.row_ptr != nullptr && inputs.col_idx != nullptr) {
    if (c.sparse_density > 0) {
      return Status::invalid(
          "workload: a given sparse layout and a random one (sparse density) are alternatives; "
          "give one");
    }
    for (const TensorView* given : {inputs.row_ptr, inputs.col_idx}) {
      if (given->dtype != DType::i32 || given->rank != 3) {
        return Status::invalid(
            "workload: a sparse layout's row_ptr and col_idx are int32 of rank 3");
      }
    }
    // The workload's own copies, so that it owns every buffer of its problem.
    const auto copy = [](const TensorView& from, base::HostTensor* to) {
      *to = base::HostTensor(DType::i32, {from.shape[0], from.shape[1], from.shape[2]});
      int32_t* out = to->data<int32_t>();
      for (int64_t x = 0; x < from.shape[0]; ++x)
        for (int64_t y = 0; y < from.shape[1]; ++y)
          for (int64_t z = 0; z < from.shape[2]; ++z) {
            *out++ = static_cast<const int32_t*>(from.data)[base::offset_of(from, x, y, z)];
          }
    };
    copy(*inputs.row_ptr, &w->row_ptr_);
    copy(*inputs.col_idx, &w->col_idx_);
    a.sparse.block_q = c.block_q;
    a.sparse.block_k = c.block_k;
    a.sparse.row_ptr = w->row_ptr_.view();
    a.sparse.col_idx = w->col_idx_.view();
  } else if (c.sparse_density > 0) {
    const int64_t nqb = (Sq + c.block_q - 1) / c.block_q;
    const int64_t nkb = (Sk + c.block_k - 1) / c.block_k;
    const int64_t per_row =
        std::clamp<int64_t>(std::llround(c.sparse_density * double(nkb)), 0, nkb);
    w->row_ptr_ = base::HostTensor(DType::i32, {1, Hq, nqb + 1});
    w->col_idx_ = base::HostTensor(DType::i32, {1, Hq, std::max<int64_t>(1, nqb * per_row)});
    std::mt19937_64 rng(c.seed ^ 0xb5ull);
    std::vector<int32_t> cols(static_cast<size_t>(nkb));
    for (int64_t h = 0; h < Hq; ++h) {
      int32_t* rp = w->row_ptr_.data<int32_t>() + h * (nqb + 1);
      int32_t* ci = w->col_idx_.data<int32_t>() + h * w->col_idx_.view().shape[2];
      rp[0] = 0;
      for (int64_t qb = 0; qb < nqb; ++qb) {
        std::iota(cols.begin(), cols.end(), 0);
        std::shuffle(cols.begin(), cols.end(), rng);
        std::sort(cols.begin(), cols.begin() + per_row);
        std::copy(cols.begin(), cols.begin() + per_row, ci + rp[qb]);
        rp[qb + 1] = int32_t(rp[qb] + per_row);
      }
    }
    a.sparse.block_q = c.block_q;
    a.sparse.block_k = c.block_k;
    a.sparse.row_ptr = w->row_ptr_.view();
    a.sparse.col_idx = w->col_idx_.view();
  }

  a.split.split_kv = c.split_kv;
  a.split.tile_m = c.tile_m;
  a.split.tile_n = c.tile_n;
  a.split.auto_target = c.auto_target;
  a.split.early_exit = c.early_exit;
  w->poison_outputs();
  return validate(a);
}

AttentionArgs Workload::unquantized_args(const TensorView& o, const TensorView& lse) const {
  AttentionArgs a = args_;
  a.q = q_src_.view();
  a.k = k_src_.view();
  a.v = v_src_.view();
  a.q_scales = a.k_scales = a.v_scales = TensorView{};
  a.v_scale_axis = VScaleAxis::head_dim;
  a.paged = PagedKv{};
  a.k_mean = TensorView{};
  a.o = o;
  a.lse = lse;
  return a;
}

void Workload::poison_outputs() {
  for (base::HostTensor* t : {&o_, &lse_}) {
    if (!t->view().given()) continue;
    for (int64_t i = 0; i < t->numel(); ++i) base::store_float(t->view(), i, NAN);
  }
}

double Workload::flops() const {
  core::Problem p;
  if (!core::validate_problem(args_, &p)) return 0;
  double pairs = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const core::Visibility vis = p.visibility(b);
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const int64_t lo = vis.lo(i), hi = vis.hi(i);
        if (hi < lo) continue;
        if (!p.sparse) {
          pairs += double(hi - lo + 1);
          continue;
        }
        const core::Problem::SparseRow row = p.sparse_row(b, h, i / p.args.sparse.block_q);
        const int64_t bk = p.args.sparse.block_k;
        for (int64_t e = 0; e < row.count; ++e) {
          const int64_t first = core::max64(lo, row.cols[e] * bk);
          const int64_t last = core::min64(hi, row.cols[e] * bk + bk - 1);
          if (last >= first) pairs += double(last - first + 1);
        }
      }
    }
  }
  return 2.0 * pairs * double(p.dim_qk + p.dim_v);
}

double Workload::min_bytes() const {
  const Config& c = config_;
  double valid_keys = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    valid_keys += double(c.kv_len.empty() ? c.seq_k : per_batch(c.kv_len, b));
  }
  const auto row_bytes = [](DType t, int64_t d) {
    return double(bits_of(t)) * double(d) / 8.0 + (is_mx(t) ? double(d) / kMxBlock : 0.0);
  };
  const double kv = valid_keys * double(c.heads_kv) *
                    (row_bytes(c.k_format, c.dim_qk) + row_bytes(c.v_format, c.dim_v));
  const double q = double(c.batch * c.seq_q * c.heads_q) * row_bytes(c.q_format, c.dim_qk);
  const double o = double(c.batch * c.seq_q * c.heads_q) *
                   (row_bytes(c.o_format, c.dim_v) + (c.return_lse ? 4.0 : 0.0));
  return kv + q + o;
}

std::string Workload::describe() const {
  const Config& c = config_;
  std::ostringstream s;
  s << "B=" << c.batch << " Sq=" << c.seq_q << " Sk=" << c.seq_k << " Hq=" << c.heads_q
    << " Hkv=" << c.heads_kv << " Dqk=" << c.dim_qk << " Dv=" << c.dim_v
    << " Q=" << name_of(c.q_format) << " K=" << name_of(c.k_format) << " V=" << name_of(c.v_format)
    << " O=" << name_of(c.o_format);
  if (is_mx(c.v_format)) s << (c.v_scale_axis == VScaleAxis::keys ? " (V scales along keys)" : "");
  static constexpr const char* kCausal[] = {"none", "top-left", "bottom-right", "prefix"};
  if (c.causal != Causal::none) s << " causal=" << kCausal[int(c.causal)];
  if (c.window >= 0) s << " window=" << c.window;
  if (!c.kv_len.empty()) s << " kv_len(per batch)";
  if (c.page_size > 0) s << " paged(" << c.page_size << ")";
  if (c.sparse_density > 0) {
    s << " sparse(" << c.sparse_density << ", " << c.block_q << "x" << c.block_k << ")";
  } else if (args_.sparse.given()) {
    s << " sparse(layout " << args_.sparse.row_ptr.shape_string() << ", " << c.block_q << "x"
      << c.block_k << ")";
  }
  s << " split_kv=" << (c.split_kv == 0 ? std::string("auto") : std::to_string(c.split_kv));
  if (c.hadamard) s << " hadamard";
  if (c.smooth_k) s << " smooth-k";
  s << " seed=" << c.seed;
  return s.str();
}

}  // namespace mxattn::workload
