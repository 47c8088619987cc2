// What a seeded random attention problem is: sizes, storage types, masks, the producer's
// transforms, paging, sparsity, split options and how the tensors are laid out in memory. The one
// description behind `mxattn run`, the benchmarks and the tests (workload/problem.h builds it).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "mxattn/attention.h"
#include "mxattn/mx.h"

namespace mxattn::workload {

struct Spec {
  uint64_t seed = 1;
  int64_t batch = 1;
  int64_t seq_q = 1;
  int64_t seq_k = 1;  // keys per sequence; paged: the last page may hold fewer (see key_capacity)
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t dim_qk = 32;
  int64_t dim_v = 32;

  DType q_type = DType::f32;
  DType k_type = DType::f32;
  DType v_type = DType::f32;
  DType o_type = DType::f32;
  VScaleAxis v_axis = VScaleAxis::head_dim;  // of an MX V
  ScaleMode scale_mode = ScaleMode::floor;

  Causal causal = Causal::none;
  std::vector<int32_t> prefix_offset;  // per batch entry, or one for all; with Causal::prefix
  std::vector<int32_t> kv_len;  // per batch entry, or one for all, in [0, seq_k]; empty: seq_k
  int64_t window = -1;
  std::optional<float> scale;
  bool lse = true;

  // What the producer does before storing: Q drawn as q_gain * N(0, 1) (a larger gain makes some
  // softmaxes peaked), K and V as N(0, 1); an offset on channel 3 of every 32-channel block of K
  // (real keys have such channels); Q and K rotated by a normalized Walsh-Hadamard; the mean key
  // subtracted (the engine gets it as k_mean). Without smoothing, `k_mean` gives the engine a
  // random k_mean of the keys as drawn.
  float q_gain = 1.0f;
  float k_outlier = 0.0f;
  bool hadamard = false;
  bool smooth_k = false;
  bool k_mean = false;

  int64_t page_size = 0;    // > 0: paged KV
  int64_t spare_pages = 0;  // pages in the pool that no block table entry names

  int32_t block_q = 0;  // > 0: block-sparse
  int32_t block_k = 0;
  // Each key block listed with probability sparse_density, or (sparse_fixed_count) exactly
  // round(sparse_density * key blocks) of them per query block.
  double sparse_density = 0.5;
  bool sparse_fixed_count = false;
  bool sparse_per_batch = true;  // false: one layout broadcast over b
  bool sparse_per_head = true;   // false: one layout broadcast over h

  int32_t split_kv = 1;     // 0: auto
  int32_t auto_target = 0;  // 0: the engine's choice
  int32_t tile_m = 0;
  int32_t tile_n = 0;
  bool early_exit = false;
  bool counts = false;  // ask for the exact counts

  // Memory layout (for the tests): permuted and padded layouts for Q, K, V, scales, O and LSE;
  // K, V and their head-dim scales head-major ([B or pages, Hkv, keys, ...] in memory behind the
  // usual [B or pages, keys, Hkv, ...] view; not with `strided`); NaN / Inf in every key slot no
  // valid key maps to (past kv_len, page padding, spare pages).
  bool strided = false;
  bool kv_head_major = false;
  bool poison_padding = true;

  bool paged() const { return page_size > 0; }
  bool sparse() const { return block_q > 0; }
  int64_t group() const { return heads_q / heads_kv; }
  // Per-batch lists hold one value for all entries or one per entry.
  int64_t kv_len_of(int64_t b) const {
    return kv_len.empty() ? seq_k : kv_len[kv_len.size() == 1 ? 0 : size_t(b)];
  }
  int64_t prefix_offset_of(int64_t b) const {
    return prefix_offset[prefix_offset.size() == 1 ? 0 : size_t(b)];
  }
  // Block table columns, and the keys a sequence's pages hold (seq_k when dense). Slots past
  // seq_k are padding, never valid keys.
  int64_t max_pages() const { return paged() ? (seq_k + page_size - 1) / page_size : 0; }
  int64_t key_capacity() const { return paged() ? max_pages() * page_size : seq_k; }
};

// The seeded draws of the generator and of tests' random specs: integers in [lo, hi], reals in
// [lo, hi), yes with probability p, a standard normal, an element of a list.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  bool chance(double p) { return real(0.0, 1.0) < p; }
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(gen_); }
  template <class T>
  T pick(const std::vector<T>& options) {
    return options[size_t(uniform(0, int64_t(options.size()) - 1))];
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

}  // namespace mxattn::workload
