// Seeded random attention problems covering every SPEC feature, for the engine tests (CPU and CUDA)
// and benchmarks.
//
// A problem comes in three layers, so that a test can change one and keep the others:
//   Spec         what the problem is: sizes, dtypes, masks, paging, sparsity, split options,
//   layout; ProblemData  the logical f32 values (Q, K, V, k_mean in BSHD order, before any
//   rounding) and the
//                integer metadata (block table, sparse layout), drawn from the spec's seed;
//   TestProblem  owns the stored tensors (rounded to f16/bf16 or quantized to MX, strided, paged)
//   and
//                the outputs, and runs an engine through the public API.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "api/engines.h"
#include "base/host_tensor.h"
#include "cpu/fast.h"
#include "cpu/fast_kernels.h"
#include "mxattn/attention.h"
#include "mxattn/mx.h"

namespace mxattn::test {

// The seeded draws the problem generators make: integers in [lo, hi], reals in [lo, hi), yes with
// probability p, a standard normal, an element of a list.
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

struct Spec {
  uint64_t seed = 1;
  int64_t batch = 1;
  int64_t seq_q = 1;
  int64_t seq_k = 1;  // paged: a multiple of page_size (max_pages * page_size)
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t dim_qk = 32;
  int64_t dim_v = 32;

  DType q_type = DType::f32;
  DType k_type = DType::f32;
  DType v_type = DType::f32;
  DType o_type = DType::f32;
  VScaleAxis v_axis = VScaleAxis::head_dim;
  ScaleMode scale_mode = ScaleMode::floor;

  Causal causal = Causal::none;
  std::vector<int32_t> prefix_offset;  // per batch, with Causal::prefix
  std::vector<int32_t> kv_len;         // per batch; empty: not given (every key valid)
  int64_t window = -1;
  std::optional<float> scale;
  bool lse = true;
  bool k_mean = false;

  int64_t page_size = 0;    // > 0: paged KV
  int64_t spare_pages = 0;  // pages in the pool that no block table entry names

  int32_t block_q = 0;  // > 0: block-sparse
  int32_t block_k = 0;
  double sparse_density = 0.5;   // chance that a key block is listed
  bool sparse_per_batch = true;  // false: one layout broadcast over b
  bool sparse_per_head = true;   // false: one layout broadcast over h

  int32_t split_kv = 1;     // 0: auto
  int32_t auto_target = 0;  // 0: the engine's choice
  int32_t tile_m = 0;
  int32_t tile_n = 0;
  bool early_exit = false;
  bool partials = false;  // ask for O_s and L_s
  bool counts = false;    // ask for the exact counts

  bool strided = false;  // permuted and padded layouts for Q, K, V, scales, O and LSE
  // K, V and their scales (along the head dim) stored head-major: [B or pages, Hkv, keys, ...]
  // in memory, passed as the usual [B or pages, keys, Hkv, ...] view (PyTorch's [B, H, S, D]).
  // Not with `strided`.
  bool kv_head_major = false;
  bool poison_padding = true;  // NaN / Inf in every key slot no valid key maps to
  // The engine whose split partition sizes the partial buffers and which the reference engine
  // reproduces (spec §3: a GPU engine's partials are checked split by split against it).
  api::EngineKind partition = api::EngineKind::cpu_fast;

  bool paged() const { return page_size > 0; }
  bool sparse() const { return block_q > 0; }
  int64_t group() const { return heads_q / heads_kv; }
  int64_t kv_len_of(int64_t b) const { return kv_len.empty() ? seq_k : kv_len[size_t(b)]; }
  // One line with every field that matters, for failure messages.
  std::string describe() const;
};

// Which features a random spec may draw. Tests narrow it to what they exercise.
struct SpecRange {
  int64_t max_batch = 3;
  int64_t max_seq_q = 40;
  int64_t max_seq_k = 160;
  int64_t max_heads_kv = 3;
  int64_t max_group = 5;
  // Cap on batch * heads_q * seq_q * seq_k * (dim_qk + dim_v), keeping the f64 reference quick.
  int64_t max_work = 3'000'000;
  bool mx = true;             // MX Q, K, V
  bool low_precision = true;  // f16 and bf16 inputs and outputs
  bool masks = true;          // causal alignments, windows, kv_len
  bool paged = true;
  bool sparse = true;
  bool split = true;  // split_kv other than 1, tile sizes, partial outputs
  bool strided = true;
  bool k_mean = true;
  bool bf16_inputs = false;  // Q, K and V all bf16 (the AMX kernels take them as they are)
};

Spec random_spec(uint64_t seed, const SpecRange& range = {});

// Random masks for a spec whose batch and seq_k are drawn, in this order: per-sequence kv_len with
// probability `kv_len_chance` (a tenth of the lengths 0, a fifth every key), a causal mode (prefix
// offsets drawn from [prefix_min, seq_k]) and, with probability 0.3, a sliding window. Every
// generator draws them alike, so that a seed's masks mean the same in every suite.
void draw_masks(Rng& rng, double kv_len_chance, int64_t prefix_min, Spec& s);

struct ProblemData {
  std::vector<float> q;       // [B, Sq, Hq, Dqk]
  std::vector<float> k;       // [B, Sk, Hkv, Dqk], zero past kv_len
  std::vector<float> v;       // [B, Sk, Hkv, Dv], zero past kv_len
  std::vector<float> k_mean;  // [B, Hkv, Dqk]
  int64_t num_pages = 0;
  std::vector<int32_t> block_table;  // [B, Sk / page_size]
  int64_t sparse_batches = 0;        // Bx of the layout (1 or B)
  int64_t sparse_heads = 0;          // Hx of the layout (1 or Hq)
  int64_t sparse_nnz_max = 0;
  std::vector<int32_t> row_ptr;  // [Bx, Hx, q_blocks + 1]
  std::vector<int32_t> col_idx;  // [Bx, Hx, nnz_max]
};

ProblemData generate_data(const Spec& spec);

// Everything an engine wrote, in logical order, as f32 (f16/bf16 widen exactly).
struct Outputs {
  std::vector<float> o;            // [B, Sq, Hq, Dv]
  std::vector<float> lse;          // [B, Hq, Sq]; empty without LSE
  std::vector<float> partial_o;    // [S, B, Sq, Hq, Dv]; empty without partials
  std::vector<float> partial_lse;  // [S, B, Hq, Sq]
  std::vector<int32_t> counts;     // [B, Hq, Sq]; empty without counts
};

class GuardedBuffer;

class TestProblem {
 public:
  explicit TestProblem(const Spec& spec);
  TestProblem(const Spec& spec, ProblemData data);
  TestProblem(TestProblem&&) noexcept;
  TestProblem& operator=(TestProblem&&) noexcept;
  ~TestProblem();

  const Spec& spec() const { return spec_; }
  const ProblemData& data() const { return data_; }
  const AttentionArgs& args() const { return args_; }
  // Partial slots S of the partition's plan (0 without partials).
  int64_t slots() const { return slots_; }

  // Fills every output (O, LSE, partials) with NaN and the counts with -1.
  void poison_outputs();
  // Poisons the outputs, then runs `engine` through mxattn::attention; the reference engine runs
  // with the spec's partition.
  Status run(Engine engine, int threads = 0);
  // Poisons the outputs, then runs the fast CPU engine with the kernel set `isa` (one of
  // cpu::checked_isas()), with the same validation and split plan as mxattn::attention.
  Status run_fast_with(cpu::SimdIsa isa, int threads = 0,
                       cpu::RowTiles row_tiles = cpu::RowTiles::bf16);
  Outputs outputs() const;

  // Moves every view into a buffer of exactly its logical size that ends against an unmapped page,
  // so a read or write past any view's end faults.
  void place_in_guarded_memory();

  // True when row i of (b, h) sees no key at all (SPEC 2, sparse layout included).
  bool row_sees_nothing(int64_t b, int64_t h, int64_t i) const;

 private:
  void build();

  Spec spec_;
  ProblemData data_;
  AttentionArgs args_;
  int64_t slots_ = 0;
  std::vector<base::HostTensor> storage_;
  std::vector<std::unique_ptr<GuardedBuffer>> guarded_;
};

// Every view of `args` that is given, with its argument name, for tests that visit them all.
struct NamedView {
  const char* name;
  TensorView* view;
};
std::vector<NamedView> given_views(AttentionArgs& args);

}  // namespace mxattn::test
