// Random attention problems for the engine tests (CPU and CUDA), built by the one problem
// generator (src/workload). A test's Spec is the workload's plus what only engine tests ask for:
// partial outputs sized by the split plan of the engine under test, whose partition the reference
// reproduces. Random specs draw the features a test exercises; a TestProblem runs the engines
// through the public API (or one fast kernel set) and reads every output back in logical order.
//
// A problem comes in three layers, so that a test can change one and keep the others: the Spec
// (what the problem is), its ProblemData (the logical f32 values and integer metadata drawn from
// the seed: workload::Data) and the TestProblem (the stored tensors and outputs:
// workload::Problem).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/engines.h"
#include "core/problem.h"
#include "core/split_plan.h"
#include "cpu/fast.h"
#include "cpu/fast_kernels.h"
#include "mxattn/attention.h"
#include "workload/problem.h"

namespace mxattn::test {

using ProblemData = workload::Data;
using workload::given_views;
using workload::NamedView;
using workload::Rng;

struct Spec : workload::Spec {
  bool partials = false;  // ask for O_s and L_s, as many slots as the partition's plan needs
  // The engine whose split partition sizes the partial buffers and which the reference engine
  // reproduces (spec §3: a GPU engine's partials are checked split by split against it).
  api::EngineKind partition = api::EngineKind::cpu_fast;

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

// batch * heads_q * seq_q * seq_k * (dim_qk + dim_v): what the f64 reference's time grows with.
int64_t work_of(const Spec& s);

// Random masks for a spec whose batch and seq_k are drawn, in this order: per-sequence kv_len with
// probability `kv_len_chance` (a tenth of the lengths 0, a fifth every key), a causal mode (prefix
// offsets drawn from [prefix_min, seq_k]) and, with probability 0.3, a sliding window. Every
// generator draws them alike, so that a seed's masks mean the same in every suite.
void draw_masks(Rng& rng, double kv_len_chance, int64_t prefix_min, Spec& s);

inline ProblemData generate_data(const Spec& spec) {
  return workload::generate(spec);
}

// Everything an engine wrote, in logical order, as f32 (f16/bf16 widen exactly).
struct Outputs {
  std::vector<float> o;            // [B, Sq, Hq, Dv]
  std::vector<float> lse;          // [B, Hq, Sq]; empty without LSE
  std::vector<float> partial_o;    // [S, B, Sq, Hq, Dv]; empty without partials
  std::vector<float> partial_lse;  // [S, B, Hq, Sq]
  std::vector<int32_t> counts;     // [B, Hq, Sq]; empty without counts
};

class TestProblem {
 public:
  // Builds the problem (throwing std::runtime_error where the generator refuses the spec).
  explicit TestProblem(const Spec& spec);
  TestProblem(const Spec& spec, ProblemData data);

  const Spec& spec() const { return spec_; }
  const ProblemData& data() const { return problem_.data(); }
  const AttentionArgs& args() const { return problem_.args(); }
  // Partial slots S of the partition's plan (0 without partials).
  int64_t slots() const { return problem_.slots(); }

  // Fills every output (O, LSE, partials) with NaN and the counts with -1.
  void poison_outputs() { problem_.poison_outputs(); }
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
  void place_in_guarded_memory() { problem_.place_in_guarded_memory(); }

  // True when row i of (b, h) sees no key at all (spec §2, sparse layout included).
  bool row_sees_nothing(int64_t b, int64_t h, int64_t i) const;

 private:
  // The validated problem and the split plan of engine `kind`, with the partials checked.
  Status plan(api::EngineKind kind, core::Problem* p, core::SplitParams* split) const;

  Spec spec_;
  workload::Problem problem_;
};

}  // namespace mxattn::test
