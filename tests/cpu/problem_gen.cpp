#include "cpu/problem_gen.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cpu/engines.h"
#include "cpu/fast.h"

namespace mxattn::test {

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

// Streams of one seed kept apart, so that editing how a spec is drawn leaves the data alone.
constexpr uint64_t kDataStream = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kLayoutStream = 0xc2b2ae3d27d4eb4full;

const char* causal_name(Causal c) {
  switch (c) {
    case Causal::top_left:
      return "top_left";
    case Causal::bottom_right:
      return "bottom_right";
    case Causal::prefix:
      return "prefix";
    default:
      return "none";
  }
}

std::string join(const std::vector<int32_t>& values) {
  std::ostringstream s;
  s << '[';
  for (size_t n = 0; n < values.size(); ++n) s << (n ? "," : "") << values[n];
  s << ']';
  return s.str();
}

int64_t work_of(const Spec& s) {
  return s.batch * s.heads_q * s.seq_q * s.seq_k * (s.dim_qk + s.dim_v);
}

// Shrinks the sizes until the f64 reference stays cheap: rows first, then batch, heads and keys.
void fit_work(Spec& s, int64_t max_work) {
  while (work_of(s) > max_work) {
    if (s.seq_q > 8) {
      s.seq_q = (s.seq_q + 1) / 2;
    } else if (s.batch > 1) {
      --s.batch;
    } else if (s.heads_q > s.heads_kv) {
      s.heads_q -= s.heads_kv;
    } else if (s.heads_kv > 1) {
      s.heads_q = --s.heads_kv;
    } else if (s.seq_q > 1) {
      --s.seq_q;
    } else if (s.seq_k > (s.paged() ? s.page_size : 1)) {
      s.seq_k = s.paged() ? s.seq_k - s.page_size : (s.seq_k + 1) / 2;
    } else {
      break;
    }
  }
}

DType random_input_type(Rng& rng, const SpecRange& range) {
  if (range.bf16_inputs) return DType::bf16;
  std::vector<DType> types = {DType::f32};
  if (range.low_precision) types.insert(types.end(), {DType::f16, DType::bf16});
  if (range.mx) {
    types.insert(types.end(), {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1});
  }
  return rng.pick(types);
}

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

// Contiguous, or (strided specs) a random order of the outer axes with padding after each row and,
// for plain floats, sometimes every other element of the innermost axis.
TensorView allocate_laid_out(std::vector<base::HostTensor>& storage, Rng& rng, bool strided,
                             DType dtype, const std::vector<int64_t>& shape) {
  std::vector<int> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  if (!strided) return allocate(storage, dtype, shape, order, 1, 0);
  std::shuffle(order.begin(), order.end() - 1, rng.engine());
  const bool packed_rows = is_mx(dtype);
  const int64_t step = !packed_rows && rng.chance(0.3) ? 2 : 1;
  const int64_t pad = packed_rows ? 32 * rng.uniform(0, 1) : rng.uniform(0, 3);
  return allocate(storage, dtype, shape, order, step, pad);
}

TensorView allocate_i32(std::vector<base::HostTensor>& storage, const std::vector<int64_t>& shape,
                        const std::vector<int32_t>& values) {
  std::vector<int> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  TensorView v = allocate(storage, DType::i32, shape, order, 1, 0);
  std::copy(values.begin(), values.end(), static_cast<int32_t*>(v.data));
  return v;
}

void check(const Status& st, const char* what) {
  if (!st) throw std::runtime_error(std::string(what) + ": " + st.message());
}

uint8_t* byte_ptr(const TensorView& v) {
  return static_cast<uint8_t*>(v.data);
}

// Where a logical key row (b, j) lives: index of axis 0 (batch or page) and of axis 1 (key or
// slot).
struct KeyPlace {
  int64_t outer;
  int64_t slot;
};

// Stores logical rows src [n0, n1, heads, dim] into `dst` (shape [*, *, heads, dim]); row (x0, x1)
// goes to place(x0, x1). MX rows are quantized along the head dim, or, for V along the keys, along
// axis 1 with scales [*, heads, blocks, dim] (scale block kb of x0 going to key_block(x0, kb)).
template <class Place, class KeyBlock>
void store_rows(const TensorView& dst, const TensorView& scales, const Spec& spec,
                const std::vector<float>& src, int64_t n0, int64_t n1, int64_t heads, int64_t dim,
                bool along_keys, Place place, KeyBlock key_block) {
  const auto src_at = [&](int64_t x0, int64_t x1, int64_t h, int64_t d) {
    return ((x0 * n1 + x1) * heads + h) * dim + d;
  };
  if (!is_mx(dst.dtype)) {
    for (int64_t x0 = 0; x0 < n0; ++x0)
      for (int64_t x1 = 0; x1 < n1; ++x1) {
        const KeyPlace at = place(x0, x1);
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < dim; ++d)
            base::store_float(dst, base::offset_of(dst, at.outer, at.slot, h, d),
                              src[size_t(src_at(x0, x1, h, d))]);
      }
    return;
  }
  const TensorView source =
      make_view(const_cast<float*>(src.data()), DType::f32, {n0, n1, heads, dim});
  const int64_t blocks = along_keys ? (n1 + 31) / 32 : dim / 32;
  base::HostTensor codes(dst.dtype, {n0, n1, heads, dim});
  base::HostTensor block_scales(DType::e8m0, along_keys
                                                 ? std::vector<int64_t>{n0, blocks, heads, dim}
                                                 : std::vector<int64_t>{n0, n1, heads, blocks});
  check(quantize(source, codes.view(), block_scales.view(), along_keys ? 1 : 3, spec.scale_mode),
        "quantize");
  const int64_t row_bytes = dim * bits_of(dst.dtype) / 8;
  const uint8_t* code_bytes = codes.data<uint8_t>();
  const uint8_t* scale_bytes = block_scales.data<uint8_t>();
  for (int64_t x0 = 0; x0 < n0; ++x0)
    for (int64_t x1 = 0; x1 < n1; ++x1) {
      const KeyPlace at = place(x0, x1);
      for (int64_t h = 0; h < heads; ++h) {
        std::memcpy(
            byte_ptr(dst) + base::offset_of(dst, at.outer, at.slot, h, 0) * bits_of(dst.dtype) / 8,
            code_bytes + src_at(x0, x1, h, 0) * bits_of(dst.dtype) / 8, size_t(row_bytes));
        if (along_keys) continue;
        for (int64_t k = 0; k < blocks; ++k) {
          byte_ptr(scales)[base::offset_of(scales, at.outer, at.slot, h, k)] =
              scale_bytes[((x0 * n1 + x1) * heads + h) * blocks + k];
        }
      }
    }
  if (!along_keys) return;
  for (int64_t x0 = 0; x0 < n0; ++x0)
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const KeyPlace at = key_block(x0, kb);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim; ++d)
          byte_ptr(scales)[base::offset_of(scales, at.outer, h, at.slot, d)] =
              scale_bytes[((x0 * blocks + kb) * heads + h) * dim + d];
    }
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
    for (int64_t k = 0; k < dim / 32; ++k)
      byte_ptr(scales)[base::offset_of(scales, outer, slot, h, k)] = 0xff;
  }
}

void fill_float(const TensorView& v, float value) {
  if (!v.given()) return;
  const int64_t bytes = bytes_needed(v).value_or(0);
  const int64_t n = bytes / (bits_of(v.dtype) / 8);
  for (int64_t e = 0; e < n; ++e) base::store_float(v, e, value);
}

int64_t offset5(const TensorView& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t i4) {
  return i0 * v.stride[0] + i1 * v.stride[1] + i2 * v.stride[2] + i3 * v.stride[3] +
         i4 * v.stride[4];
}

}  // namespace

std::string Spec::describe() const {
  std::ostringstream s;
  s << "seed=" << seed << " B=" << batch << " Sq=" << seq_q << " Sk=" << seq_k << " Hq=" << heads_q
    << " Hkv=" << heads_kv << " Dqk=" << dim_qk << " Dv=" << dim_v << " q=" << name_of(q_type)
    << " k=" << name_of(k_type) << " v=" << name_of(v_type) << " o=" << name_of(o_type)
    << " v_axis=" << (v_axis == VScaleAxis::keys ? "keys" : "head_dim")
    << " scale_mode=" << (scale_mode == ScaleMode::rceil ? "rceil" : "floor")
    << " causal=" << causal_name(causal) << " prefix=" << join(prefix_offset)
    << " kv_len=" << join(kv_len) << " window=" << window
    << " scale=" << (scale ? std::to_string(*scale) : "default") << " lse=" << lse
    << " k_mean=" << k_mean << " page_size=" << page_size << " spare_pages=" << spare_pages
    << " block_q=" << block_q << " block_k=" << block_k << " density=" << sparse_density
    << " sparse_per_b=" << sparse_per_batch << " sparse_per_h=" << sparse_per_head
    << " split_kv=" << split_kv << " auto_target=" << auto_target << " tile_m=" << tile_m
    << " tile_n=" << tile_n << " early_exit=" << early_exit << " partials=" << partials
    << " counts=" << counts << " strided=" << strided << " kv_head_major=" << kv_head_major
    << " poison_padding=" << poison_padding << " partition=" << api::name_of(partition);
  return s.str();
}

void draw_masks(Rng& rng, double kv_len_chance, int64_t prefix_min, Spec& s) {
  if (rng.chance(kv_len_chance)) {
    for (int64_t b = 0; b < s.batch; ++b) {
      const double r = rng.real(0.0, 1.0);
      s.kv_len.push_back(int32_t(r < 0.1 ? 0 : r < 0.3 ? s.seq_k : rng.uniform(0, s.seq_k)));
    }
  }
  s.causal =
      rng.pick<Causal>({Causal::none, Causal::top_left, Causal::bottom_right, Causal::prefix});
  if (s.causal == Causal::prefix) {
    for (int64_t b = 0; b < s.batch; ++b)
      s.prefix_offset.push_back(int32_t(rng.uniform(prefix_min, s.seq_k)));
  }
  if (rng.chance(0.3)) s.window = rng.uniform(0, s.seq_k);
}

Spec random_spec(uint64_t seed, const SpecRange& range) {
  Rng rng(seed);
  Spec s;
  s.seed = seed;
  s.batch = rng.uniform(1, range.max_batch);
  s.heads_kv = rng.uniform(1, range.max_heads_kv);
  s.heads_q = s.heads_kv * rng.uniform(1, range.max_group);
  s.q_type = random_input_type(rng, range);
  s.k_type = random_input_type(rng, range);
  s.v_type = random_input_type(rng, range);
  s.o_type =
      range.low_precision ? rng.pick<DType>({DType::f32, DType::f16, DType::bf16}) : DType::f32;
  const bool qk_mx = is_mx(s.q_type) || is_mx(s.k_type);
  s.dim_qk = qk_mx ? rng.pick<int64_t>({32, 64}) : rng.pick<int64_t>({4, 8, 13, 16, 32, 40, 64});
  s.dim_v =
      is_mx(s.v_type) ? rng.pick<int64_t>({32, 64, 96}) : rng.pick<int64_t>({4, 8, 16, 24, 32, 64});
  if (is_mx(s.v_type) && rng.chance(0.5)) s.v_axis = VScaleAxis::keys;
  if (rng.chance(0.5)) s.scale_mode = ScaleMode::rceil;

  s.seq_q = rng.chance(0.3) ? 1 : rng.uniform(1, range.max_seq_q);
  if (range.paged && rng.chance(0.3)) {
    s.page_size = s.v_axis == VScaleAxis::keys ? rng.pick<int64_t>({32, 64})
                                               : rng.pick<int64_t>({16, 32, 64});
    s.seq_k = s.page_size * rng.uniform(1, std::max<int64_t>(1, range.max_seq_k / s.page_size));
    s.spare_pages = rng.uniform(0, 2);
  } else {
    s.seq_k = rng.uniform(1, range.max_seq_k);
  }
  fit_work(s, range.max_work);

  if (range.masks) draw_masks(rng, 0.5, 0, s);
  if (rng.chance(0.2)) s.scale = float(rng.real(0.05, 0.5));
  s.lse = rng.chance(0.8);
  s.k_mean = range.k_mean && rng.chance(0.2);

  if (range.sparse && rng.chance(0.25)) {
    s.block_q = rng.pick<int32_t>({16, 32, 64});
    s.block_k = rng.pick<int32_t>({16, 32, 64});
    s.sparse_density = rng.chance(0.2) ? 1.0 : rng.real(0.0, 1.0);
    s.sparse_per_batch = rng.chance(0.5);
    s.sparse_per_head = rng.chance(0.5);
  }
  if (range.split) {
    const double r = rng.real(0.0, 1.0);
    s.split_kv = r < 0.5 ? 1 : r < 0.75 ? int32_t(rng.uniform(2, 8)) : 0;
    // The engines' own auto target splits only long runs; a small one splits these short ones.
    if (s.split_kv == 0 && rng.chance(0.5)) s.auto_target = int32_t(rng.uniform(1, 4));
    s.tile_m = rng.pick<int32_t>({0, 1, 4, 16, 64});
    s.tile_n = rng.pick<int32_t>({0, 8, 16, 32, 64});
    s.early_exit = rng.chance(0.3);
    s.partials = rng.chance(0.4);
    s.counts = rng.chance(0.4);
  }
  s.strided = range.strided && rng.chance(0.4);
  s.poison_padding = rng.chance(0.7);
  return s;
}

ProblemData generate_data(const Spec& s) {
  Rng rng(s.seed ^ kDataStream);
  ProblemData d;
  // A larger gain makes some softmaxes peaked, where the max subtraction matters.
  const float q_gain = rng.chance(0.3) ? 3.0f : 1.0f;
  d.q.resize(size_t(s.batch * s.seq_q * s.heads_q * s.dim_qk));
  for (float& x : d.q) x = q_gain * rng.normal();
  const auto keys = [&](int64_t dim) {
    std::vector<float> out(size_t(s.batch * s.seq_k * s.heads_kv * dim), 0.0f);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < s.kv_len_of(b); ++j)
        for (int64_t e = 0; e < s.heads_kv * dim; ++e)
          out[size_t((b * s.seq_k + j) * s.heads_kv * dim + e)] = rng.normal();
    return out;
  };
  d.k = keys(s.dim_qk);
  d.v = keys(s.dim_v);
  if (s.k_mean) {
    d.k_mean.resize(size_t(s.batch * s.heads_kv * s.dim_qk));
    for (float& x : d.k_mean) x = 0.5f * rng.normal();
  }
  if (s.paged()) {
    const int64_t max_pages = s.seq_k / s.page_size;
    d.num_pages = s.batch * max_pages + s.spare_pages;
    std::vector<int32_t> pages(size_t(d.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng.engine());
    d.block_table.assign(pages.begin(), pages.begin() + s.batch * max_pages);
  }
  if (s.sparse()) {
    const int64_t q_blocks = (s.seq_q + s.block_q - 1) / s.block_q;
    const int64_t k_blocks = (s.seq_k + s.block_k - 1) / s.block_k;
    d.sparse_batches = s.sparse_per_batch ? s.batch : 1;
    d.sparse_heads = s.sparse_per_head ? s.heads_q : 1;
    std::vector<std::vector<int32_t>> lists;
    for (int64_t bh = 0; bh < d.sparse_batches * d.sparse_heads; ++bh) {
      std::vector<int32_t> cols;
      for (int64_t qb = 0; qb < q_blocks; ++qb) {
        d.row_ptr.push_back(int32_t(cols.size()));
        for (int64_t kb = 0; kb < k_blocks; ++kb)
          if (rng.chance(s.sparse_density)) cols.push_back(int32_t(kb));
      }
      d.row_ptr.push_back(int32_t(cols.size()));
      d.sparse_nnz_max = std::max<int64_t>(d.sparse_nnz_max, int64_t(cols.size()));
      lists.push_back(std::move(cols));
    }
    d.sparse_nnz_max = std::max<int64_t>(d.sparse_nnz_max, 1);
    for (std::vector<int32_t>& cols : lists) {
      cols.resize(size_t(d.sparse_nnz_max), 0);
      d.col_idx.insert(d.col_idx.end(), cols.begin(), cols.end());
    }
  }
  return d;
}

TestProblem::TestProblem(const Spec& spec) : TestProblem(spec, generate_data(spec)) {}

TestProblem::TestProblem(const Spec& spec, ProblemData data) : spec_(spec), data_(std::move(data)) {
  build();
}

TestProblem::TestProblem(TestProblem&&) noexcept = default;
TestProblem& TestProblem::operator=(TestProblem&&) noexcept = default;
TestProblem::~TestProblem() = default;

void TestProblem::build() {
  const Spec& s = spec_;
  Rng rng(s.seed ^ kLayoutStream);
  AttentionArgs& a = args_;
  const int64_t kv_outer = s.paged() ? data_.num_pages : s.batch;
  const int64_t kv_slots = s.paged() ? s.page_size : s.seq_k;
  // A tensor as the spec lays it out; K, V and their head-dim scales (`kv`) head-major where asked:
  // [outer, Hkv, keys, ...] in memory behind the [outer, keys, Hkv, ...] view.
  const auto laid_out = [&](DType type, const std::vector<int64_t>& shape, bool kv) {
    if (kv && s.kv_head_major) return allocate(storage_, type, shape, {0, 2, 1, 3}, 1, 0);
    return allocate_laid_out(storage_, rng, s.strided, type, shape);
  };
  const auto scale_view = [&](DType type, int64_t outer, int64_t inner, int64_t heads, int64_t dim,
                              bool kv) {
    return is_mx(type) ? laid_out(DType::e8m0, {outer, inner, heads, dim / 32}, kv) : TensorView{};
  };

  a.q = laid_out(s.q_type, {s.batch, s.seq_q, s.heads_q, s.dim_qk}, false);
  a.k = laid_out(s.k_type, {kv_outer, kv_slots, s.heads_kv, s.dim_qk}, true);
  a.v = laid_out(s.v_type, {kv_outer, kv_slots, s.heads_kv, s.dim_v}, true);
  a.q_scales = scale_view(s.q_type, s.batch, s.seq_q, s.heads_q, s.dim_qk, false);
  a.k_scales = scale_view(s.k_type, kv_outer, kv_slots, s.heads_kv, s.dim_qk, true);
  const bool v_keys = is_mx(s.v_type) && s.v_axis == VScaleAxis::keys;
  if (v_keys) {
    a.v_scales = allocate_laid_out(storage_, rng, s.strided, DType::e8m0,
                                   {kv_outer, s.heads_kv, (kv_slots + 31) / 32, s.dim_v});
  } else {
    a.v_scales = scale_view(s.v_type, kv_outer, kv_slots, s.heads_kv, s.dim_v, true);
  }
  a.v_scale_axis = v_keys ? VScaleAxis::keys : VScaleAxis::head_dim;

  // Logical key (b, j) -> (page or batch, slot); a V scale block kb of b -> (page or batch, block).
  const auto key_place = [&](int64_t b, int64_t j) {
    if (!s.paged()) return KeyPlace{b, j};
    const int64_t max_pages = s.seq_k / s.page_size;
    return KeyPlace{data_.block_table[size_t(b * max_pages + j / s.page_size)], j % s.page_size};
  };
  const auto key_block = [&](int64_t b, int64_t kb) {
    const KeyPlace at = key_place(b, kb * 32);
    return KeyPlace{at.outer, at.slot / 32};
  };
  const auto query_place = [](int64_t b, int64_t i) { return KeyPlace{b, i}; };
  store_rows(a.q, a.q_scales, s, data_.q, s.batch, s.seq_q, s.heads_q, s.dim_qk, false, query_place,
             query_place);
  store_rows(a.k, a.k_scales, s, data_.k, s.batch, s.seq_k, s.heads_kv, s.dim_qk, false, key_place,
             key_block);
  store_rows(a.v, a.v_scales, s, data_.v, s.batch, s.seq_k, s.heads_kv, s.dim_v, v_keys, key_place,
             key_block);

  if (s.poison_padding) {
    // Every physical slot no valid key maps to: past kv_len, and whole pages outside the table.
    std::vector<char> valid(size_t(kv_outer * kv_slots), 0);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < s.kv_len_of(b); ++j) {
        const KeyPlace at = key_place(b, j);
        valid[size_t(at.outer * kv_slots + at.slot)] = 1;
      }
    const std::vector<float> poisons = {NAN, INFINITY, -INFINITY};
    for (int64_t x = 0; x < kv_outer; ++x) {
      for (int64_t slot = 0; slot < kv_slots; ++slot) {
        if (valid[size_t(x * kv_slots + slot)]) continue;
        const float poison = rng.pick(poisons);
        poison_key_row(a.k, a.k_scales, true, x, slot, s.heads_kv, s.dim_qk, poison);
        poison_key_row(a.v, a.v_scales, !v_keys, x, slot, s.heads_kv, s.dim_v, poison);
      }
      if (!v_keys) continue;
      for (int64_t kb = 0; kb * 32 < kv_slots; ++kb) {
        const int64_t first = kb * 32, last = std::min(kv_slots, first + 32);
        if (std::any_of(valid.begin() + x * kv_slots + first, valid.begin() + x * kv_slots + last,
                        [](char c) { return c != 0; }))
          continue;
        for (int64_t h = 0; h < s.heads_kv; ++h)
          for (int64_t d = 0; d < s.dim_v; ++d)
            byte_ptr(a.v_scales)[base::offset_of(a.v_scales, x, h, kb, d)] = 0xff;
      }
    }
  }

  a.o =
      allocate_laid_out(storage_, rng, s.strided, s.o_type, {s.batch, s.seq_q, s.heads_q, s.dim_v});
  if (s.lse) {
    a.lse = allocate_laid_out(storage_, rng, s.strided, DType::f32, {s.batch, s.heads_q, s.seq_q});
  }
  a.causal = s.causal;
  if (s.causal == Causal::prefix)
    a.prefix_offset = allocate_i32(storage_, {s.batch}, s.prefix_offset);
  if (!s.kv_len.empty()) a.kv_len = allocate_i32(storage_, {s.batch}, s.kv_len);
  a.window = s.window;
  a.scale = s.scale;
  if (s.paged()) {
    a.paged.page_size = s.page_size;
    a.paged.block_table =
        allocate_i32(storage_, {s.batch, s.seq_k / s.page_size}, data_.block_table);
  }
  if (s.sparse()) {
    const int64_t q_blocks = (s.seq_q + s.block_q - 1) / s.block_q;
    a.sparse.block_q = s.block_q;
    a.sparse.block_k = s.block_k;
    a.sparse.row_ptr = allocate_i32(
        storage_, {data_.sparse_batches, data_.sparse_heads, q_blocks + 1}, data_.row_ptr);
    a.sparse.col_idx = allocate_i32(
        storage_, {data_.sparse_batches, data_.sparse_heads, data_.sparse_nnz_max}, data_.col_idx);
  }
  if (s.k_mean) {
    a.k_mean = allocate(storage_, DType::f32, {s.batch, s.heads_kv, s.dim_qk}, {0, 1, 2}, 1, 0);
    std::copy(data_.k_mean.begin(), data_.k_mean.end(), static_cast<float*>(a.k_mean.data));
  }
  a.split.split_kv = s.split_kv;
  a.split.auto_target = s.auto_target;
  a.split.tile_m = s.tile_m;
  a.split.tile_n = s.tile_n;
  a.split.early_exit = s.early_exit;
  if (s.counts) {
    a.split.counts = allocate(storage_, DType::i32, {s.batch, s.heads_q, s.seq_q}, {0, 1, 2}, 1, 0);
  }
  if (s.partials) {
    // The plan decides how many slots auto needs; without a valid problem, the most auto may use.
    core::Problem p;
    if (core::validate_problem(a, &p)) {
      slots_ = core::partial_slots(p, api::split_params(p, s.partition));
    } else {
      slots_ = s.split_kv > 0 ? s.split_kv : core::SplitParams{}.max_splits;
    }
    a.split.partial_o =
        allocate(storage_, DType::f32, {slots_, s.batch, s.seq_q, s.heads_q, s.dim_v},
                 {0, 1, 2, 3, 4}, 1, 0);
    a.split.partial_lse =
        allocate(storage_, DType::f32, {slots_, s.batch, s.heads_q, s.seq_q}, {0, 1, 2, 3}, 1, 0);
  }
}

void TestProblem::poison_outputs() {
  fill_float(args_.o, NAN);
  fill_float(args_.lse, NAN);
  fill_float(args_.split.partial_o, NAN);
  fill_float(args_.split.partial_lse, NAN);
  const TensorView& counts = args_.split.counts;
  if (counts.given()) std::memset(counts.data, 0xff, size_t(bytes_needed(counts).value_or(0)));
}

Status TestProblem::run(Engine engine, int threads) {
  poison_outputs();
  if (engine == Engine::cpu_reference && !api::is_cpu(spec_.partition)) {
    core::Problem p;
    if (Status st = core::validate_problem(args_, &p); !st) return st;
    const core::SplitParams split = api::split_params(p, spec_.partition);
    if (Status st = core::validate_partial_slots(args_, core::partial_slots(p, split)); !st) {
      return st;
    }
    cpu::run_reference(p, split);
    return Status::ok();
  }
  RunOptions options;
  options.engine = engine;
  options.threads = threads;
  return attention(args_, options);
}

Status TestProblem::run_fast_with(cpu::SimdIsa isa, int threads, cpu::RowTiles row_tiles) {
  poison_outputs();
  core::Problem p;
  if (Status st = core::validate_problem(args_, &p); !st) return st;
  const core::SplitParams split = api::split_params(p, api::EngineKind::cpu_fast);
  if (Status st = core::validate_partial_slots(args_, core::partial_slots(p, split)); !st) {
    return st;
  }
  cpu::run_fast_with(isa, p, split, threads, row_tiles);
  return Status::ok();
}

Outputs TestProblem::outputs() const {
  const Spec& s = spec_;
  const AttentionArgs& a = args_;
  Outputs out;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.seq_q; ++i)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t d = 0; d < s.dim_v; ++d)
          out.o.push_back(base::load_float(a.o, base::offset_of(a.o, b, i, h, d)));
  const auto rows = [&](const TensorView& v, std::vector<float>& dst) {
    if (!v.given()) return;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i)
          dst.push_back(static_cast<const float*>(v.data)[base::offset_of(v, b, h, i)]);
  };
  rows(a.lse, out.lse);
  const TensorView& po = a.split.partial_o;
  const TensorView& pl = a.split.partial_lse;
  for (int64_t sl = 0; sl < slots_; ++sl) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.seq_q; ++i)
        for (int64_t h = 0; h < s.heads_q; ++h)
          for (int64_t d = 0; d < s.dim_v; ++d)
            out.partial_o.push_back(
                static_cast<const float*>(po.data)[offset5(po, sl, b, i, h, d)]);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i)
          out.partial_lse.push_back(
              static_cast<const float*>(pl.data)[base::offset_of(pl, sl, b, h, i)]);
  }
  const TensorView& counts = a.split.counts;
  if (counts.given()) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i)
          out.counts.push_back(base::read_i32(counts, base::offset_of(counts, b, h, i)));
  }
  return out;
}

void TestProblem::place_in_guarded_memory() {
  for (const NamedView& nv : given_views(args_)) {
    const int64_t bytes = bytes_needed(*nv.view).value_or(0);
    if (bytes == 0) continue;
    guarded_.push_back(std::make_unique<GuardedBuffer>(bytes));
    std::memcpy(guarded_.back()->data(), nv.view->data, size_t(bytes));
    nv.view->data = guarded_.back()->data();
    nv.view->bytes = bytes;
  }
}

bool TestProblem::row_sees_nothing(int64_t b, int64_t h, int64_t i) const {
  const Spec& s = spec_;
  core::Visibility vis;
  vis.last = s.kv_len_of(b) - 1;
  vis.causal = s.causal != Causal::none;
  vis.offset = s.causal == Causal::bottom_right ? s.kv_len_of(b) - s.seq_q
               : s.causal == Causal::prefix     ? s.prefix_offset[size_t(b)]
                                                : 0;
  vis.window = s.window;
  for (int64_t j = 0; j < s.seq_k; ++j) {
    if (!vis.visible(i, j)) continue;
    if (!s.sparse()) return false;
    const int64_t q_blocks = (s.seq_q + s.block_q - 1) / s.block_q;
    const int64_t slab =
        (s.sparse_per_batch ? b : 0) * data_.sparse_heads + (s.sparse_per_head ? h : 0);
    const int32_t* row_ptr = data_.row_ptr.data() + slab * (q_blocks + 1);
    const int32_t* cols = data_.col_idx.data() + slab * data_.sparse_nnz_max;
    const int64_t qb = i / s.block_q;
    if (std::find(cols + row_ptr[qb], cols + row_ptr[qb + 1], int32_t(j / s.block_k)) !=
        cols + row_ptr[qb + 1])
      return false;
  }
  return true;
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

}  // namespace mxattn::test
