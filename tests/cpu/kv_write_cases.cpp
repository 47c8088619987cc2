#include "cpu/kv_write_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "base/float16.h"
#include "mx/kv_rows.h"

namespace mxattn::test {
namespace {

constexpr DType kCacheTypes[] = {DType::bf16, DType::f16,  DType::e4m3, DType::e5m2,
                                 DType::e2m3, DType::e3m2, DType::e2m1};

int64_t cache_bytes(DType t, int64_t elements) {
  return elements * bits_of(t) / 8;
}

// One value of a token row: mostly N(0, s) with s spread over many octaves, some exact zeros, and
// in a few rows non-finite values, subnormal ranges or whole zero blocks.
float draw_value(std::mt19937_64& rng, int kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  switch (kind) {
    case 1:  // a block with NaN or Inf
      return std::uniform_int_distribution<int>(0, 9)(rng) == 0
                 ? (std::uniform_int_distribution<int>(0, 1)(rng) == 0
                        ? std::numeric_limits<float>::quiet_NaN()
                        : -std::numeric_limits<float>::infinity())
                 : normal(rng);
    case 2:  // zeros
      return 0.0f;
    case 3:  // tiny: subnormal ranges of the formats and of f32
      return normal(rng) * 1e-38f;
    case 4:  // large
      return normal(rng) * 3e4f;
    default:
      return normal(rng) * std::ldexp(1.0f, std::uniform_int_distribution<int>(-8, 8)(rng));
  }
}

void fill_rows(std::vector<uint8_t>& out, DType type, int64_t rows, int64_t dim,
               std::mt19937_64& rng) {
  out.assign(size_t(cache_bytes(type, rows * dim)), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    for (int64_t d = 0; d < dim; ++d) {
      const int block_kind = (d / 32) % 2 == 0 ? kind : 0;
      float x = draw_value(rng, block_kind > 4 ? 0 : block_kind);
      if (type == DType::f16 && std::isfinite(x)) x = std::fmax(-6e4f, std::fmin(6e4f, x));
      mx::store_plain(out.data(), type, r * dim + d, x);
    }
  }
}

std::vector<float> load_row(const std::vector<uint8_t>& src, DType type, int64_t row, int64_t dim) {
  std::vector<float> x(static_cast<size_t>(dim));
  for (int64_t d = 0; d < dim; ++d) x[size_t(d)] = mx::load_plain(src.data(), type, row * dim + d);
  return x;
}

// Places one token's prepared rows (`heads` rows of D values) at `slot` of a cache: quantized by
// mxattn::quantize on their own ([Hkv, D], blocks along the head dim) or rounded.
void place_token(const std::vector<float>& rows, DType cache_type, ScaleMode mode, int64_t slot,
                 int64_t heads, std::vector<uint8_t>& cache, std::vector<uint8_t>& scales) {
  const int64_t dim = int64_t(rows.size()) / heads;
  const int64_t first = slot * heads * dim;
  if (!is_mx(cache_type)) {
    for (int64_t i = 0; i < heads * dim; ++i) {
      mx::store_plain(cache.data(), cache_type, first + i, rows[size_t(i)]);
    }
    return;
  }
  std::vector<float> src = rows;
  std::vector<uint8_t> codes(size_t(cache_bytes(cache_type, heads * dim)));
  std::vector<uint8_t> block_scales(size_t(heads * dim / kMxBlock));
  const Status st =
      quantize(make_view(src.data(), DType::f32, {heads, dim}),
               make_view(codes.data(), cache_type, {heads, dim}),
               make_view(block_scales.data(), DType::e8m0, {heads, dim / kMxBlock}), 1, mode);
  if (!st) throw std::runtime_error(st.message());
  std::memcpy(cache.data() + cache_bytes(cache_type, first), codes.data(), codes.size());
  std::memcpy(scales.data() + first / kMxBlock, block_scales.data(), block_scales.size());
}

}  // namespace

std::string KvCase::describe() const {
  std::ostringstream s;
  s << "seed=" << seed << " T=" << tokens << " Hkv=" << heads << " Dk=" << dim_k << " Dv=" << dim_v
    << " pages=" << pages << " page_size=" << page_size << " src=" << name_of(src_type)
    << " k=" << name_of(k_type) << " v=" << name_of(v_type)
    << " mode=" << (mode == ScaleMode::rceil ? "rceil" : "floor") << " rotate_k=" << rotate_k
    << " k_mean=" << k_mean << " slots_i64=" << slots_i64;
  return s.str();
}

KvCase random_kv_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  KvCase c;
  c.seed = seed;
  c.heads = pick(1, 4);
  c.dim_k = std::vector<int64_t>{32, 64, 128, 256}[size_t(pick(0, 3))];
  c.dim_v = pick(0, 3) == 0 ? 96 : c.dim_k;
  c.page_size = std::vector<int64_t>{1, 16, 32}[size_t(pick(0, 2))];
  c.pages = pick(1, 6);
  c.tokens = pick(0, c.pages * c.page_size + 3);
  c.src_type = std::vector<DType>{DType::f32, DType::f16, DType::bf16}[size_t(pick(0, 2))];
  c.k_type = kCacheTypes[size_t(pick(0, 6))];
  c.v_type = kCacheTypes[size_t(pick(0, 6))];
  c.mode = pick(0, 1) == 0 ? ScaleMode::floor : ScaleMode::rceil;
  c.rotate_k = pick(0, 3) == 0;
  c.k_mean = pick(0, 3) == 0;
  c.slots_i64 = pick(0, 1) == 0;
  return c;
}

KvBuffers::KvBuffers(const KvCase& kv_case) : c(kv_case) {
  std::mt19937_64 rng(c.seed * 7919 + 11);
  fill_rows(k, c.src_type, c.tokens * c.heads, c.dim_k, rng);
  fill_rows(v, c.src_type, c.tokens * c.heads, c.dim_v, rng);
  const int64_t slots_total = c.pages * c.page_size;
  k_cache.assign(size_t(cache_bytes(c.k_type, slots_total * c.heads * c.dim_k)), kCacheSentinel);
  v_cache.assign(size_t(cache_bytes(c.v_type, slots_total * c.heads * c.dim_v)), kCacheSentinel);
  if (is_mx(c.k_type))
    k_scales.assign(size_t(slots_total * c.heads * c.dim_k / 32), kCacheSentinel);
  if (is_mx(c.v_type))
    v_scales.assign(size_t(slots_total * c.heads * c.dim_v / 32), kCacheSentinel);
  // Distinct slots in a random order (pages out of order), some tokens skipped with -1.
  std::vector<int64_t> order(static_cast<size_t>(slots_total));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t t = 0; t < c.tokens; ++t) {
    const bool skip = t >= slots_total || std::uniform_int_distribution<int>(0, 5)(rng) == 0;
    slots.push_back(skip ? -1 : order[size_t(t)]);
    slots32.push_back(int32_t(slots.back()));
  }
  if (c.k_mean) {
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (int64_t i = 0; i < c.heads * c.dim_k; ++i) k_mean.push_back(normal(rng));
  }
}

KvWriteArgs KvBuffers::args() const {
  auto* self = const_cast<KvBuffers*>(this);  // the views write the caches
  KvWriteArgs a;
  a.k = make_view(self->k.data(), c.src_type, {c.tokens, c.heads, c.dim_k});
  a.v = make_view(self->v.data(), c.src_type, {c.tokens, c.heads, c.dim_v});
  a.k_cache = make_view(self->k_cache.data(), c.k_type, {c.pages, c.page_size, c.heads, c.dim_k});
  a.v_cache = make_view(self->v_cache.data(), c.v_type, {c.pages, c.page_size, c.heads, c.dim_v});
  if (is_mx(c.k_type)) {
    a.k_scales = make_view(self->k_scales.data(), DType::e8m0,
                           {c.pages, c.page_size, c.heads, c.dim_k / 32});
  }
  if (is_mx(c.v_type)) {
    a.v_scales = make_view(self->v_scales.data(), DType::e8m0,
                           {c.pages, c.page_size, c.heads, c.dim_v / 32});
  }
  a.slot_mapping = c.slots_i64 ? make_view(self->slots.data(), DType::i64, {c.tokens})
                               : make_view(self->slots32.data(), DType::i32, {c.tokens});
  a.mode = c.mode;
  a.rotate_k = c.rotate_k;
  if (c.k_mean) a.k_mean = make_view(self->k_mean.data(), DType::f32, {c.heads, c.dim_k});
  return a;
}

KvExpected expected_after_write(const KvBuffers& b) {
  const KvCase& c = b.c;
  KvExpected e{b.k_cache, b.v_cache, b.k_scales, b.v_scales};
  for (int64_t t = 0; t < c.tokens; ++t) {
    if (b.slots[size_t(t)] < 0) continue;
    std::vector<float> keys, values;
    for (int64_t h = 0; h < c.heads; ++h) {
      std::vector<float> key = load_row(b.k, c.src_type, t * c.heads + h, c.dim_k);
      if (c.rotate_k) {
        const Status st = hadamard_rotate(make_view(key.data(), DType::f32, {1, c.dim_k}));
        if (!st) throw std::runtime_error(st.message());
      }
      if (c.k_mean) {
        for (int64_t d = 0; d < c.dim_k; ++d) key[size_t(d)] -= b.k_mean[size_t(h * c.dim_k + d)];
      }
      keys.insert(keys.end(), key.begin(), key.end());
      const std::vector<float> value = load_row(b.v, c.src_type, t * c.heads + h, c.dim_v);
      values.insert(values.end(), value.begin(), value.end());
    }
    place_token(keys, c.k_type, c.mode, b.slots[size_t(t)], c.heads, e.k_cache, e.k_scales);
    place_token(values, c.v_type, c.mode, b.slots[size_t(t)], c.heads, e.v_cache, e.v_scales);
  }
  return e;
}

}  // namespace mxattn::test
