#include "workload/data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "base/host_tensor.h"
#include "base/index.h"
#include "base/text.h"

namespace mxattn::workload {
namespace {

// The metadata's stream of a seed, apart from the values' hashes.
constexpr uint64_t kDataStream = 0x9e3779b97f4a7c15ull;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// gain * N(0, 1) values that depend only on (seed, stream, index): the same whatever the thread
// count.
std::vector<float> normal_values(int64_t n, uint64_t seed, uint64_t stream, float gain) {
  std::vector<float> x(static_cast<size_t>(n));
  const uint64_t key = splitmix64(seed * 0x100000001b3ull + stream);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 2) {
    const uint64_t r = splitmix64(key ^ uint64_t(i));
    const double u1 = (double((r >> 11) & 0x1fffffull) + 1.0) / 2097153.0;  // (0, 1]
    const double u2 = double(r >> 43) / 2097152.0;                          // [0, 1)
    const double radius = std::sqrt(-2.0 * std::log(u1));
    x[size_t(i)] = gain * float(radius * std::cos(6.283185307179586 * u2));
    if (i + 1 < n) x[size_t(i) + 1] = gain * float(radius * std::sin(6.283185307179586 * u2));
  }
  return x;
}

Status invalid(const std::string& what) {
  return Status::invalid("workload: " + what);
}

}  // namespace

Status check_spec(const Spec& s) {
  if (s.batch < 1 || s.seq_q < 1 || s.seq_k < 1 || s.heads_kv < 1 || s.heads_q < 1 ||
      s.dim_qk < 1 || s.dim_v < 1) {
    return invalid("every size must be at least 1");
  }
  for (const auto* list : {&s.kv_len, &s.prefix_offset}) {
    if (!list->empty() && list->size() != 1 && int64_t(list->size()) != s.batch) {
      return invalid(
          base::cat("per-batch lists need one value or one per batch entry (", s.batch, ")"));
    }
  }
  if (s.causal == Causal::prefix && s.prefix_offset.empty()) {
    return invalid("causal prefix needs prefix offsets");
  }
  for (size_t b = 0; b < s.kv_len.size(); ++b) {
    if (s.kv_len[b] < 0 || s.kv_len[b] > s.seq_k) {
      return invalid(
          base::cat("kv_len[", b, "] = ", s.kv_len[b], " is outside [0, ", s.seq_k, "] (Sk)"));
    }
  }
  if (s.paged() && is_mx(s.v_type) && s.v_axis == VScaleAxis::keys && s.page_size % kMxBlock != 0) {
    return invalid("V scales along the keys need a page size that is a multiple of 32");
  }
  if (s.block_q < 0 || s.block_k < 0 || (s.sparse() && s.block_k == 0)) {
    return invalid("a sparse layout needs block_q and block_k of at least 1 (block_q 0: dense)");
  }
  if (s.key_capacity() != s.seq_k && s.seq_k > std::numeric_limits<int32_t>::max()) {
    return invalid("the keys of a partly filled last page are counted by an int32 kv_len");
  }
  return Status::ok();
}

void draw_fixed_count_rows(std::mt19937_64& rng, int64_t rows, int64_t k_blocks, int64_t per_row,
                           std::vector<int32_t>* row_ptr, std::vector<int32_t>* col_idx) {
  std::vector<int32_t> order(static_cast<size_t>(k_blocks));
  for (int64_t r = 0; r < rows; ++r) {
    row_ptr->push_back(int32_t(r * per_row));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::sort(order.begin(), order.begin() + per_row);
    col_idx->insert(col_idx->end(), order.begin(), order.begin() + per_row);
  }
  row_ptr->push_back(int32_t(rows * per_row));
}

Data generate(const Spec& s) {
  Data d;
  d.q = normal_values(s.batch * s.seq_q * s.heads_q * s.dim_qk, s.seed, 1, s.q_gain);
  d.k = normal_values(s.batch * s.seq_k * s.heads_kv * s.dim_qk, s.seed, 2, 1.0f);
  d.v = normal_values(s.batch * s.seq_k * s.heads_kv * s.dim_v, s.seed, 3, 1.0f);
  // Keys past kv_len are zero: they take no part in an MX block's scale along the keys.
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t len = std::clamp<int64_t>(s.kv_len_of(b), 0, s.seq_k);
    const auto row = [&](int64_t j, int64_t dim) { return (b * s.seq_k + j) * s.heads_kv * dim; };
    std::fill(d.k.begin() + row(len, s.dim_qk), d.k.begin() + row(s.seq_k, s.dim_qk), 0.0f);
    std::fill(d.v.begin() + row(len, s.dim_v), d.v.begin() + row(s.seq_k, s.dim_v), 0.0f);
    for (int64_t j = 0; s.k_outlier != 0 && j < len * s.heads_kv; ++j) {
      for (int64_t c = 3; c < s.dim_qk; c += kMxBlock) {
        d.k[size_t(row(0, s.dim_qk) + j * s.dim_qk + c)] += s.k_outlier;
      }
    }
  }
  if (s.k_mean && !s.smooth_k) {
    d.k_mean = normal_values(s.batch * s.heads_kv * s.dim_qk, s.seed, 4, 0.5f);
  }

  Rng rng(s.seed ^ kDataStream);
  if (s.paged()) {
    const int64_t max_pages = s.max_pages();
    d.num_pages = s.batch * max_pages + s.spare_pages;
    std::vector<int32_t> pages(size_t(d.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng.engine());
    d.block_table.assign(pages.begin(), pages.begin() + s.batch * max_pages);
  }
  if (s.sparse()) {
    const int64_t q_blocks = (s.seq_q + s.block_q - 1) / s.block_q;
    const int64_t k_blocks = (s.seq_k + s.block_k - 1) / s.block_k;
    const int64_t batches = s.sparse_per_batch ? s.batch : 1;
    const int64_t heads = s.sparse_per_head ? s.heads_q : 1;
    const int64_t per_row =
        std::clamp<int64_t>(std::llround(s.sparse_density * double(k_blocks)), 0, k_blocks);
    std::vector<std::vector<int32_t>> lists;
    int64_t nnz_max = 1;
    for (int64_t bh = 0; bh < batches * heads; ++bh) {
      std::vector<int32_t> cols;
      if (s.sparse_fixed_count) {
        draw_fixed_count_rows(rng.engine(), q_blocks, k_blocks, per_row, &d.row_ptr, &cols);
      } else {
        for (int64_t qb = 0; qb < q_blocks; ++qb) {
          d.row_ptr.push_back(int32_t(cols.size()));
          for (int64_t kb = 0; kb < k_blocks; ++kb)
            if (rng.chance(s.sparse_density)) cols.push_back(int32_t(kb));
        }
        d.row_ptr.push_back(int32_t(cols.size()));
      }
      nnz_max = std::max<int64_t>(nnz_max, int64_t(cols.size()));
      lists.push_back(std::move(cols));
    }
    d.row_ptr_shape = {batches, heads, q_blocks + 1};
    d.col_idx_shape = {batches, heads, nnz_max};
    for (std::vector<int32_t>& cols : lists) {
      cols.resize(size_t(nnz_max), 0);
      d.col_idx.insert(d.col_idx.end(), cols.begin(), cols.end());
    }
  }
  return d;
}

Status take_inputs(const Spec& s, const Inputs& inputs, Data* d) {
  const struct {
    const TensorView* given;
    std::vector<float>* values;
    std::vector<int64_t> shape;
    const char* name;
  } sources[] = {{inputs.q, &d->q, {s.batch, s.seq_q, s.heads_q, s.dim_qk}, "Q"},
                 {inputs.k, &d->k, {s.batch, s.seq_k, s.heads_kv, s.dim_qk}, "K"},
                 {inputs.v, &d->v, {s.batch, s.seq_k, s.heads_kv, s.dim_v}, "V"}};
  for (const auto& [given, values, shape, name] : sources) {
    if (given == nullptr) continue;
    bool same = given->rank == 4 && is_plain_float(given->dtype);
    for (int i = 0; same && i < 4; ++i) same = given->shape[i] == shape[size_t(i)];
    if (!same) {
      const base::HostTensor want(DType::f32, shape);
      return invalid(base::cat(name, " input must be f32, f16 or bf16 of shape ",
                               want.view().shape_string(), ", found ", name_of(given->dtype), " ",
                               given->shape_string()));
    }
    for (size_t i = 0; i < values->size(); ++i) (*values)[i] = base::load_float(*given, int64_t(i));
  }
  if (inputs.row_ptr == nullptr || inputs.col_idx == nullptr) return Status::ok();
  for (const TensorView* given : {inputs.row_ptr, inputs.col_idx}) {
    if (given->dtype != DType::i32 || given->rank != 3) {
      return invalid("a sparse layout's row_ptr and col_idx are int32 of rank 3");
    }
  }
  // The data's own copies, so that the problem owns every buffer.
  const auto copy = [](const TensorView& from, std::vector<int32_t>* to) {
    to->clear();
    for (int64_t x = 0; x < from.shape[0]; ++x)
      for (int64_t y = 0; y < from.shape[1]; ++y)
        for (int64_t z = 0; z < from.shape[2]; ++z)
          to->push_back(base::read_i32(from, base::offset_of(from, x, y, z)));
  };
  copy(*inputs.row_ptr, &d->row_ptr);
  copy(*inputs.col_idx, &d->col_idx);
  for (int i = 0; i < 3; ++i) {
    d->row_ptr_shape[size_t(i)] = inputs.row_ptr->shape[i];
    d->col_idx_shape[size_t(i)] = inputs.col_idx->shape[i];
  }
  return Status::ok();
}

}  // namespace mxattn::workload
