#include "workload/problem.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "base/index.h"
#include "base/text.h"
#include "core/problem.h"

namespace mxattn::workload {

// Memory whose last byte sits just before a PROT_NONE page.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(int64_t bytes) {
    const int64_t page = sysconf(_SC_PAGESIZE);
    const int64_t body = (bytes + page - 1) / page * page;
    mapped_bytes_ = size_t(body + page);
    base_ = static_cast<std::byte*>(
        mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("guarded buffer: mmap failed");
    if (mprotect(base_ + body, size_t(page), PROT_NONE) != 0) {
      munmap(base_, mapped_bytes_);
      throw std::runtime_error("guarded buffer: mprotect failed");
    }
    data_ = base_ + body - bytes;
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() { munmap(base_, mapped_bytes_); }

  void* data() const { return data_; }

 private:
  std::byte* base_ = nullptr;
  std::byte* data_ = nullptr;
  size_t mapped_bytes_ = 0;
};

namespace {

// The layout's stream of a seed (strides, poison values), apart from the data's.
constexpr uint64_t kLayoutStream = 0xc2b2ae3d27d4eb4full;

// A view of `shape` over fresh zeroed storage, its axes in memory order `order` (outermost first),
// `step` elements apart on the innermost axis and `pad` unused elements after each innermost run.
TensorView allocate(std::vector<base::HostTensor>& storage, DType dtype,
                    const std::vector<int64_t>& shape, const std::vector<int>& order, int64_t step,
                    int64_t pad) {
  TensorView v;
  v.dtype = dtype;
  v.rank = int(shape.size());
  const int inner = order.back();
  v.stride[inner] = step;
  int64_t extent = shape[size_t(inner)] * step + pad;
  for (int k = v.rank - 2; k >= 0; --k) {
    const int axis = order[size_t(k)];
    v.stride[axis] = extent;
    extent *= shape[size_t(axis)];
  }
  for (int a = 0; a < v.rank; ++a) v.shape[a] = shape[size_t(a)];
  storage.emplace_back(dtype, std::initializer_list<int64_t>{extent});
  v.data = storage.back().view().data;
  v.bytes = storage.back().bytes();
  return v;
}

TensorView allocate_contiguous(std::vector<base::HostTensor>& storage, DType dtype,
                               const std::vector<int64_t>& shape) {
  std::vector<int> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  return allocate(storage, dtype, shape, order, 1, 0);
}

// Contiguous, or (strided) a random order of the outer axes with padding after each row and, for
// plain floats, sometimes every other element of the innermost axis.
TensorView allocate_laid_out(std::vector<base::HostTensor>& storage, Rng& rng, bool strided,
                             DType dtype, const std::vector<int64_t>& shape) {
  if (!strided) return allocate_contiguous(storage, dtype, shape);
  std::vector<int> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end() - 1, rng.engine());
  const bool packed_rows = is_mx(dtype);
  const int64_t step = !packed_rows && rng.chance(0.3) ? 2 : 1;
  const int64_t pad = packed_rows ? 32 * rng.uniform(0, 1) : rng.uniform(0, 3);
  return allocate(storage, dtype, shape, order, step, pad);
}

TensorView allocate_i32(std::vector<base::HostTensor>& storage, const std::vector<int64_t>& shape,
                        const std::vector<int32_t>& values) {
  const TensorView v = allocate_contiguous(storage, DType::i32, shape);
  std::copy(values.begin(), values.end(), static_cast<int32_t*>(v.data));
  return v;
}

uint8_t* byte_ptr(const TensorView& v) {
  return static_cast<uint8_t*>(v.data);
}

// Where a logical row lives: index of axis 0 (batch or page) and of axis 1 (key or slot).
struct Place {
  int64_t outer;
  int64_t slot;
};

// Stores the logical rows src [n0, n1, heads, dim] (f32) into `dst` (shape [*, *, heads, dim]), row
// (x0, x1) at place(x0, x1): rounded to a plain float type, or quantized to MX along the head dim
// (scales [*, *, heads, dim / 32]) or, `along_keys`, along axis 1 (scales [*, heads, blocks, dim],
// block kb of x0 at key_block(x0, kb)).
template <class PlaceFn, class BlockFn>
Status store_rows(const TensorView& dst, const TensorView& scales, ScaleMode mode,
                  const std::vector<float>& src, int64_t n0, int64_t n1, int64_t heads, int64_t dim,
                  bool along_keys, PlaceFn place, BlockFn key_block) {
  const int64_t rows = n0 * n1;
  if (!is_mx(dst.dtype)) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const Place at = place(r / n1, r % n1);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t first = base::offset_of(dst, at.outer, at.slot, h, 0);
        const float* row = src.data() + (r * heads + h) * dim;
        for (int64_t d = 0; d < dim; ++d) base::store_float(dst, first + d * dst.stride[3], row[d]);
      }
    }
    return Status::ok();
  }
  const TensorView source =
      make_view(const_cast<float*>(src.data()), DType::f32, {n0, n1, heads, dim});
  const int64_t blocks = along_keys ? (n1 + kMxBlock - 1) / kMxBlock : dim / kMxBlock;
  base::HostTensor codes(dst.dtype, {n0, n1, heads, dim});
  base::HostTensor block_scales(DType::e8m0, along_keys
                                                 ? std::vector<int64_t>{n0, blocks, heads, dim}
                                                 : std::vector<int64_t>{n0, n1, heads, blocks});
  if (Status st = quantize(source, codes.view(), block_scales.view(), along_keys ? 1 : 3, mode);
      !st) {
    return st;
  }
  const int bits = bits_of(dst.dtype);
  const int64_t row_bytes = dim * bits / 8;
  const uint8_t* code_bytes = codes.data<uint8_t>();
  const uint8_t* scale_bytes = block_scales.data<uint8_t>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const Place at = place(r / n1, r % n1);
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(byte_ptr(dst) + base::offset_of(dst, at.outer, at.slot, h, 0) * bits / 8,
                  code_bytes + (r * heads + h) * dim * bits / 8, size_t(row_bytes));
      if (along_keys) continue;
      for (int64_t k = 0; k < blocks; ++k) {
        byte_ptr(scales)[base::offset_of(scales, at.outer, at.slot, h, k)] =
            scale_bytes[(r * heads + h) * blocks + k];
      }
    }
  }
  if (!along_keys) return Status::ok();
  for (int64_t x0 = 0; x0 < n0; ++x0)
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const Place at = key_block(x0, kb);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim; ++d)
          byte_ptr(scales)[base::offset_of(scales, at.outer, h, at.slot, d)] =
              scale_bytes[((x0 * blocks + kb) * heads + h) * dim + d];
    }
  return Status::ok();
}

// Overwrites key row `slot` of (outer, every head) with NaN or +-Inf (plain) or all-ones codes
// (MX: NaN for FP8, the largest magnitudes for FP6/FP4) and its head-dim scales with the NaN scale.
void poison_key_row(const TensorView& data, const TensorView& scales, bool head_dim_scales,
                    int64_t outer, int64_t slot, int64_t heads, int64_t dim, float poison) {
  for (int64_t h = 0; h < heads; ++h) {
    if (!is_mx(data.dtype)) {
      for (int64_t d = 0; d < dim; ++d)
        base::store_float(data, base::offset_of(data, outer, slot, h, d), poison);
      continue;
    }
    std::memset(byte_ptr(data) + base::offset_of(data, outer, slot, h, 0) * bits_of(data.dtype) / 8,
                0xff, size_t(dim * bits_of(data.dtype) / 8));
    if (!head_dim_scales) continue;
    for (int64_t k = 0; k < dim / kMxBlock; ++k)
      byte_ptr(scales)[base::offset_of(scales, outer, slot, h, k)] = 0xff;
  }
}

void fill_float(const TensorView& v, float value) {
  if (!v.given()) return;
  const int64_t n = bytes_needed(v).value_or(0) / (bits_of(v.dtype) / 8);
  for (int64_t e = 0; e < n; ++e) base::store_float(v, e, value);
}

}  // namespace

Problem::Problem() = default;
Problem::Problem(Problem&&) noexcept = default;
Problem& Problem::operator=(Problem&&) noexcept = default;
Problem::~Problem() = default;

Status Problem::build(const Spec& spec, Data data, Problem* out) {
  if (Status st = check_spec(spec); !st) return st;
  Problem p;
  p.spec_ = spec;
  p.data_ = std::move(data);
  if (Status st = p.lay_out(); !st) return st;
  *out = std::move(p);
  return Status::ok();
}

Status Problem::build(const Spec& spec, Problem* out, const Inputs& inputs) {
  if (Status st = check_spec(spec); !st) return st;
  Data data = generate(spec);
  if (Status st = take_inputs(spec, inputs, &data); !st) return st;
  if (Status st = build(spec, std::move(data), out); !st) return st;
  out->given_layout_ = inputs.row_ptr != nullptr && inputs.col_idx != nullptr;
  return validate(out->args_);
}

Status Problem::lay_out() {
  const Spec& s = spec_;
  const Data& d = data_;
  const int64_t B = s.batch, Sq = s.seq_q, Sk = s.seq_k, Hq = s.heads_q, Hkv = s.heads_kv;
  const int64_t Dqk = s.dim_qk, Dv = s.dim_v;
  const int64_t max_pages = s.max_pages();
  const auto& rp = d.row_ptr_shape;
  const auto& ci = d.col_idx_shape;
  // The data must fit the spec (what the spec does not use may be anything).
  const struct {
    size_t have;
    int64_t want;
    bool used;
    const char* name;
  } sizes[] = {{d.q.size(), B * Sq * Hq * Dqk, true, "Q"},
               {d.k.size(), B * Sk * Hkv * Dqk, true, "K"},
               {d.v.size(), B * Sk * Hkv * Dv, true, "V"},
               {d.k_mean.size(), B * Hkv * Dqk, s.k_mean && !s.smooth_k, "k_mean"},
               {d.block_table.size(), B * max_pages, s.paged(), "block table"},
               {d.row_ptr.size(), rp[0] * rp[1] * rp[2], s.sparse(), "row_ptr"},
               {d.col_idx.size(), ci[0] * ci[1] * ci[2], s.sparse(), "col_idx"}};
  for (const auto& [have, want, used, name] : sizes) {
    if (used && int64_t(have) != want) {
      return Status::invalid(base::cat("workload: the data's ", name, " holds ", have,
                                       " values, not the ", want, " of the spec"));
    }
  }
  for (size_t n = 0; s.paged() && n < d.block_table.size(); ++n) {
    if (d.block_table[n] < 0 || d.block_table[n] >= d.num_pages) {
      return Status::invalid(base::cat("workload: block table entry ", d.block_table[n],
                                       " is not one of the ", d.num_pages, " pages"));
    }
  }
  Rng rng(s.seed ^ kLayoutStream);
  AttentionArgs& a = args_;
  a = AttentionArgs{};
  storage_.clear();
  guarded_.clear();
  slots_ = 0;
  const int64_t kv_outer = s.paged() ? d.num_pages : B;
  const int64_t kv_slots = s.paged() ? s.page_size : Sk;

  // A tensor as the spec lays it out; K, V and their head-dim scales (`kv`) head-major where asked:
  // [outer, Hkv, keys, ...] in memory behind the [outer, keys, Hkv, ...] view.
  const auto laid_out = [&](DType type, const std::vector<int64_t>& shape, bool kv) {
    if (kv && s.kv_head_major) return allocate(storage_, type, shape, {0, 2, 1, 3}, 1, 0);
    return allocate_laid_out(storage_, rng, s.strided, type, shape);
  };
  const auto scale_view = [&](DType type, int64_t outer, int64_t inner, int64_t heads, int64_t dim,
                              bool kv) {
    return is_mx(type) ? laid_out(DType::e8m0, {outer, inner, heads, dim / kMxBlock}, kv)
                       : TensorView{};
  };
  a.q = laid_out(s.q_type, {B, Sq, Hq, Dqk}, false);
  a.k = laid_out(s.k_type, {kv_outer, kv_slots, Hkv, Dqk}, true);
  a.v = laid_out(s.v_type, {kv_outer, kv_slots, Hkv, Dv}, true);
  a.q_scales = scale_view(s.q_type, B, Sq, Hq, Dqk, false);
  a.k_scales = scale_view(s.k_type, kv_outer, kv_slots, Hkv, Dqk, true);
  const bool v_keys = is_mx(s.v_type) && s.v_axis == VScaleAxis::keys;
  if (v_keys) {
    a.v_scales = allocate_laid_out(storage_, rng, s.strided, DType::e8m0,
                                   {kv_outer, Hkv, (kv_slots + kMxBlock - 1) / kMxBlock, Dv});
  } else {
    a.v_scales = scale_view(s.v_type, kv_outer, kv_slots, Hkv, Dv, true);
  }
  a.v_scale_axis = v_keys ? VScaleAxis::keys : VScaleAxis::head_dim;

  // Valid keys: kv_len where given, else every key; page padding past seq_k is never a key.
  if (!s.kv_len.empty() || s.key_capacity() != Sk) {
    std::vector<int32_t> lengths;
    for (int64_t b = 0; b < B; ++b) lengths.push_back(int32_t(s.kv_len_of(b)));
    a.kv_len = allocate_i32(storage_, {B}, lengths);
  }

  // What the producer stores: Q and K rotated, K smoothed (over the valid keys), or the data's
  // k_mean.
  std::vector<float> q_work, k_work;
  const std::vector<float>* q_src = &d.q;
  const std::vector<float>* k_src = &d.k;
  if (s.hadamard || s.smooth_k) {
    k_work = d.k;
    k_src = &k_work;
  }
  if (s.hadamard) {
    q_work = d.q;
    q_src = &q_work;
    if (Status st = hadamard_rotate(make_view(q_work.data(), DType::f32, {B, Sq, Hq, Dqk})); !st) {
      return st;
    }
    if (Status st = hadamard_rotate(make_view(k_work.data(), DType::f32, {B, Sk, Hkv, Dqk})); !st) {
      return st;
    }
  }
  if (s.smooth_k || s.k_mean) {
    a.k_mean = allocate_contiguous(storage_, DType::f32, {B, Hkv, Dqk});
    if (s.smooth_k) {
      const TensorView keys = make_view(k_work.data(), DType::f32, {B, Sk, Hkv, Dqk});
      if (Status st = smooth_keys(keys, a.kv_len, a.k_mean); !st) return st;
    } else {
      std::copy(d.k_mean.begin(), d.k_mean.end(), static_cast<float*>(a.k_mean.data));
    }
  }

  // Logical key (b, j) -> (page or batch, slot); a V scale block kb of b -> (page or batch, block).
  const auto key_place = [&](int64_t b, int64_t j) {
    if (!s.paged()) return Place{b, j};
    return Place{d.block_table[size_t(b * max_pages + j / s.page_size)], j % s.page_size};
  };
  const auto key_block = [&](int64_t b, int64_t kb) {
    const Place at = key_place(b, kb * kMxBlock);
    return Place{at.outer, at.slot / kMxBlock};
  };
  const auto query_place = [](int64_t b, int64_t i) { return Place{b, i}; };
  if (Status st = store_rows(a.q, a.q_scales, s.scale_mode, *q_src, B, Sq, Hq, Dqk, false,
                             query_place, query_place);
      !st) {
    return st;
  }
  if (Status st = store_rows(a.k, a.k_scales, s.scale_mode, *k_src, B, Sk, Hkv, Dqk, false,
                             key_place, key_block);
      !st) {
    return st;
  }
  if (Status st = store_rows(a.v, a.v_scales, s.scale_mode, d.v, B, Sk, Hkv, Dv, v_keys, key_place,
                             key_block);
      !st) {
    return st;
  }

  if (s.poison_padding) {
    // Every physical slot no valid key maps to: past kv_len, page padding, pages outside the table.
    std::vector<char> valid(size_t(kv_outer * kv_slots), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < s.kv_len_of(b); ++j) {
        const Place at = key_place(b, j);
        valid[size_t(at.outer * kv_slots + at.slot)] = 1;
      }
    const std::vector<float> poisons = {NAN, INFINITY, -INFINITY};
    for (int64_t x = 0; x < kv_outer; ++x) {
      for (int64_t slot = 0; slot < kv_slots; ++slot) {
        if (valid[size_t(x * kv_slots + slot)]) continue;
        const float poison = rng.pick(poisons);
        poison_key_row(a.k, a.k_scales, true, x, slot, Hkv, Dqk, poison);
        poison_key_row(a.v, a.v_scales, !v_keys, x, slot, Hkv, Dv, poison);
      }
      if (!v_keys) continue;
      for (int64_t kb = 0; kb * kMxBlock < kv_slots; ++kb) {
        const int64_t first = kb * kMxBlock, last = std::min(kv_slots, first + kMxBlock);
        if (std::any_of(valid.begin() + x * kv_slots + first, valid.begin() + x * kv_slots + last,
                        [](char c) { return c != 0; }))
          continue;
        for (int64_t h = 0; h < Hkv; ++h)
          for (int64_t e = 0; e < Dv; ++e)
            byte_ptr(a.v_scales)[base::offset_of(a.v_scales, x, h, kb, e)] = 0xff;
      }
    }
  }

  a.o = allocate_laid_out(storage_, rng, s.strided, s.o_type, {B, Sq, Hq, Dv});
  if (s.lse) a.lse = allocate_laid_out(storage_, rng, s.strided, DType::f32, {B, Hq, Sq});
  a.causal = s.causal;
  if (!s.prefix_offset.empty()) {
    std::vector<int32_t> offsets;
    for (int64_t b = 0; b < B; ++b) offsets.push_back(int32_t(s.prefix_offset_of(b)));
    a.prefix_offset = allocate_i32(storage_, {B}, offsets);
  }
  a.window = s.window;
  a.scale = s.scale;
  if (s.paged()) {
    a.paged.page_size = s.page_size;
    a.paged.block_table = allocate_i32(storage_, {B, max_pages}, d.block_table);
  }
  if (s.sparse()) {
    a.sparse.block_q = s.block_q;
    a.sparse.block_k = s.block_k;
    a.sparse.row_ptr = allocate_i32(storage_, {rp[0], rp[1], rp[2]}, d.row_ptr);
    a.sparse.col_idx = allocate_i32(storage_, {ci[0], ci[1], ci[2]}, d.col_idx);
  }
  a.split.split_kv = s.split_kv;
  a.split.auto_target = s.auto_target;
  a.split.tile_m = s.tile_m;
  a.split.tile_n = s.tile_n;
  a.split.early_exit = s.early_exit;
  if (s.counts) a.split.counts = allocate_contiguous(storage_, DType::i32, {B, Hq, Sq});
  poison_outputs();
  return Status::ok();
}

void Problem::add_partials(int64_t slots) {
  const Spec& s = spec_;
  slots_ = slots;
  args_.split.partial_o =
      allocate_contiguous(storage_, DType::f32, {slots, s.batch, s.seq_q, s.heads_q, s.dim_v});
  args_.split.partial_lse =
      allocate_contiguous(storage_, DType::f32, {slots, s.batch, s.heads_q, s.seq_q});
  fill_float(args_.split.partial_o, NAN);
  fill_float(args_.split.partial_lse, NAN);
}

void Problem::poison_outputs() {
  fill_float(args_.o, NAN);
  fill_float(args_.lse, NAN);
  fill_float(args_.split.partial_o, NAN);
  fill_float(args_.split.partial_lse, NAN);
  const TensorView& counts = args_.split.counts;
  if (counts.given()) std::memset(counts.data, 0xff, size_t(bytes_needed(counts).value_or(0)));
}

void Problem::place_in_guarded_memory() {
  for (const NamedView& nv : given_views(args_)) {
    const int64_t bytes = bytes_needed(*nv.view).value_or(0);
    if (bytes == 0) continue;
    guarded_.push_back(std::make_unique<GuardedBuffer>(bytes));
    std::memcpy(guarded_.back()->data(), nv.view->data, size_t(bytes));
    nv.view->data = guarded_.back()->data();
    nv.view->bytes = bytes;
  }
}

AttentionArgs Problem::unquantized_args(const TensorView& o, const TensorView& lse) const {
  const Spec& s = spec_;
  const auto f32 = [](const std::vector<float>& values, std::initializer_list<int64_t> shape) {
    return make_view(const_cast<float*>(values.data()), DType::f32, shape);
  };
  AttentionArgs a = args_;
  a.q = f32(data_.q, {s.batch, s.seq_q, s.heads_q, s.dim_qk});
  a.k = f32(data_.k, {s.batch, s.seq_k, s.heads_kv, s.dim_qk});
  a.v = f32(data_.v, {s.batch, s.seq_k, s.heads_kv, s.dim_v});
  a.q_scales = a.k_scales = a.v_scales = TensorView{};
  a.v_scale_axis = VScaleAxis::head_dim;
  a.paged = PagedKv{};
  // Smoothing's k_mean belongs to the stored keys; a given one to the problem.
  if (s.smooth_k) a.k_mean = TensorView{};
  a.o = o;
  a.lse = lse;
  return a;
}

double Problem::flops() const {
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

double Problem::min_bytes() const {
  const Spec& s = spec_;
  double valid_keys = 0;
  for (int64_t b = 0; b < s.batch; ++b) valid_keys += double(s.kv_len_of(b));
  const auto row_bytes = [](DType t, int64_t d) {
    return double(bits_of(t)) * double(d) / 8.0 + (is_mx(t) ? double(d) / kMxBlock : 0.0);
  };
  const double kv = valid_keys * double(s.heads_kv) *
                    (row_bytes(s.k_type, s.dim_qk) + row_bytes(s.v_type, s.dim_v));
  const double rows = double(s.batch * s.seq_q * s.heads_q);
  const double q = rows * row_bytes(s.q_type, s.dim_qk);
  const double o = rows * (row_bytes(s.o_type, s.dim_v) + (s.lse ? 4.0 : 0.0));
  return kv + q + o;
}

std::string Problem::describe() const {
  const Spec& s = spec_;
  std::ostringstream out;
  out << "B=" << s.batch << " Sq=" << s.seq_q << " Sk=" << s.seq_k << " Hq=" << s.heads_q
      << " Hkv=" << s.heads_kv << " Dqk=" << s.dim_qk << " Dv=" << s.dim_v
      << " Q=" << name_of(s.q_type) << " K=" << name_of(s.k_type) << " V=" << name_of(s.v_type)
      << " O=" << name_of(s.o_type);
  if (is_mx(s.v_type) && s.v_axis == VScaleAxis::keys) out << " (V scales along keys)";
  static constexpr const char* kCausal[] = {"none", "top-left", "bottom-right", "prefix"};
  if (s.causal != Causal::none) out << " causal=" << kCausal[int(s.causal)];
  if (s.window >= 0) out << " window=" << s.window;
  if (!s.kv_len.empty()) out << " kv_len(per batch)";
  if (s.paged()) out << " paged(" << s.page_size << ")";
  if (s.sparse() && given_layout_) {
    out << " sparse(layout " << args_.sparse.row_ptr.shape_string() << ", " << s.block_q << "x"
        << s.block_k << ")";
  } else if (s.sparse()) {
    out << " sparse(" << s.sparse_density << ", " << s.block_q << "x" << s.block_k << ")";
  }
  out << " split_kv=" << (s.split_kv == 0 ? std::string("auto") : std::to_string(s.split_kv));
  if (s.hadamard) out << " hadamard";
  if (s.smooth_k) out << " smooth-k";
  out << " seed=" << s.seed;
  return out.str();
}

std::vector<NamedView> given_views(AttentionArgs& a) {
  std::vector<NamedView> all = {{"q", &a.q},
                                {"k", &a.k},
                                {"v", &a.v},
                                {"o", &a.o},
                                {"lse", &a.lse},
                                {"q_scales", &a.q_scales},
                                {"k_scales", &a.k_scales},
                                {"v_scales", &a.v_scales},
                                {"prefix_offset", &a.prefix_offset},
                                {"kv_len", &a.kv_len},
                                {"block_table", &a.paged.block_table},
                                {"row_ptr", &a.sparse.row_ptr},
                                {"col_idx", &a.sparse.col_idx},
                                {"k_mean", &a.k_mean},
                                {"partial_o", &a.split.partial_o},
                                {"partial_lse", &a.split.partial_lse},
                                {"counts", &a.split.counts}};
  std::vector<NamedView> given;
  for (const NamedView& nv : all)
    if (nv.view->given()) given.push_back(nv);
  return given;
}

Spec decode_step() {
  Spec s;
  s.seq_k = 8192;
  s.heads_q = 32;
  s.heads_kv = 8;
  s.dim_qk = s.dim_v = 128;
  s.q_type = DType::bf16;
  s.k_type = s.v_type = DType::e4m3;
  s.o_type = DType::bf16;
  s.split_kv = 0;
  s.spare_pages = 2;
  s.sparse_fixed_count = true;
  s.sparse_per_batch = false;
  return s;
}

}  // namespace mxattn::workload
