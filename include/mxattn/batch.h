// A plan made once for a serving engine's capacities and run many times (spec §12): every run
// reads the step's lengths and block table from buffers the caller owns and takes that run's
// tensors, so one plan serves every layer and every step. The runs equal ragged calls (spec §10)
// with the same arguments, bitwise.
#pragma once

#include <cstdint>
#include <optional>

#include "mxattn/attention.h"
#include "mxattn/ragged.h"

namespace mxattn {

// What every run of a plan shares: capacities, formats, head dims and masks.
struct BatchShape {
  int64_t max_sequences = 0;   // B of a run: at most this many
  int64_t max_query_rows = 0;  // total_q of a run: at most this many
  int64_t max_kv_len = 0;      // keys of any sequence (paged: its pages hold them)
  int64_t page_size = 0;       // 0: dense caches [max_sequences, max_kv_len, Hkv, D]
  int64_t num_pages = 0;       // paged: pages in each pool
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t dim_qk = 0;
  int64_t dim_v = 0;
  DType q_type = DType::bf16;
  DType k_type = DType::bf16;
  DType v_type = DType::bf16;
  DType o_type = DType::bf16;
  VScaleAxis v_scale_axis = VScaleAxis::head_dim;
  Causal causal = Causal::bottom_right;
  int64_t window = -1;
  std::optional<float> scale;
  bool lse = false;    // runs write LSE [Hq, total_q]
  SplitOptions split;  // split_kv (0: auto), tiles, auto target; no partial outputs
};

// One run's tensors and metadata. Q, O, LSE and the metadata may be shorter than the capacities
// (their leading axis is the run's total_q, B + 1, B); the caches are the planned pools.
struct BatchRun {
  TensorView q;         // [total_q, Hq, Dqk]
  TensorView q_scales;  // MX Q: [total_q, Hq, Dqk / 32]
  TensorView k;         // dense [max_sequences, max_kv_len, Hkv, Dqk] or pages
  TensorView v;
  TensorView k_scales;
  TensorView v_scales;
  TensorView o;             // [total_q, Hq, Dv]
  TensorView lse;           // [Hq, total_q] where the plan writes LSE
  TensorView cu_seqlens_q;  // int32 [B + 1] (vLLM's query_start_loc)
  TensorView seq_lens;      // int32 [B]
  TensorView block_table;   // paged: int32 [B, pages per sequence]
};

class BatchPlan {
 public:
  // Checks the shape (formats, head dims, masks and capacities that no engine could run are named
  // errors) and builds the plan for the engine `options` names (the CPU engines; the GPU's with
  // Engine::cuda where this build has it).
  static Status plan(const BatchShape& shape, const RunOptions& options, BatchPlan* out);

  // Runs the planned attention. Every tensor must have the planned type, heads and head dims and
  // fit the capacities; metadata past them (more sequences or rows, a length past max_kv_len, a
  // page past the pools) is a named error and nothing is written.
  Status run(const BatchRun& run) const;

  const BatchShape& shape() const { return shape_; }
  bool ready() const { return ready_; }

 private:
  BatchShape shape_;
  RunOptions options_;
  bool ready_ = false;
};

}  // namespace mxattn
