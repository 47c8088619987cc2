// The attention call: one argument struct describing the whole problem (spec §1-7), checked
// once at the edge, then run by an engine.
#pragma once

#include <cstdint>
#include <optional>

#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn {

// Causal alignment (spec §2): which diagonal the causal mask follows.
enum class Causal : uint8_t {
  none,
  top_left,      // off_b = 0 (PyTorch is_causal)
  bottom_right,  // off_b = kv_len[b] - Sq (FlashAttention >= 2.1, cuDNN BOTTOM_RIGHT)
  prefix,        // off_b = prefix_offset[b]
};

// Axis along which V's 32-element MX blocks run (spec §5).
enum class VScaleAxis : uint8_t {
  head_dim,  // scales [B, Sk, Hkv, Dv/32] (paged: [pages, page_size, Hkv, Dv/32])
  keys,      // scales [B, Hkv, ceil(Sk/32), Dv] (paged: [pages, Hkv, page_size/32, Dv])
};

enum class Engine : uint8_t {
  automatic,      // CUDA when the tensors are on a GPU, else the fast CPU engine
  cpu_reference,  // f64 plain loops: the truth every engine is checked against
  cpu_fast,       // blocked online softmax, SIMD, multithreaded
  cuda,
};

// Block-sparse layout in BSR form over query blocks (spec §6). row_ptr is int32 [Bx, Hx, nqb + 1]
// and col_idx int32 [Bx, Hx, nnz_max], with Bx in {1, B} and Hx in {1, Hq} (1 broadcasts);
// nqb = ceil(Sq / block_q); each (b, h) row_ptr starts at 0.
struct SparseLayout {
  int32_t block_q = 0;
  int32_t block_k = 0;
  TensorView row_ptr;
  TensorView col_idx;
  bool given() const { return row_ptr.given(); }
};

// Paged KV cache (spec §4). With page_size > 0, K and V are [num_pages, page_size, Hkv, D] and
// block_table is int32 [B, max_pages]; the logical key length is max_pages * page_size.
struct PagedKv {
  int64_t page_size = 0;
  TensorView block_table;
  bool given() const { return page_size > 0; }
};

// Split-KV (spec §3).
struct SplitOptions {
  int32_t split_kv = 1;  // splits per query tile; 0 = auto (per tile, from its own key-tile count)
  int32_t tile_m = 0;    // query rows per tile; 0 = the engine's choice
  int32_t tile_n = 0;    // keys per key tile; 0 = the engine's choice
  bool early_exit = false;  // leave splits >= the exact count unwritten
  // split_kv = auto: key tiles per split (spec §3's fixed target); 0 = the engine's choice. Give
  // the same value to two engines to compare their partials split by split.
  int32_t auto_target = 0;
  // Optional outputs of the partials: O_s f32 [S, B, Sq, Hq, Dv], L_s f32 [S, B, Hq, Sq] and the
  // exact per-row counts int32 [B, Hq, Sq], where S is at least the largest split count of the
  // plan.
  TensorView partial_o;
  TensorView partial_lse;
  TensorView counts;
};

struct AttentionArgs {
  TensorView q;    // [B, Sq, Hq, Dqk]
  TensorView k;    // [B, Sk, Hkv, Dqk], or paged [pages, page_size, Hkv, Dqk]
  TensorView v;    // [B, Sk, Hkv, Dv], or paged [pages, page_size, Hkv, Dv]
  TensorView o;    // [B, Sq, Hq, Dv], f32, f16 or bf16
  TensorView lse;  // optional f32 [B, Hq, Sq], natural log

  // E8M0 scales of MX inputs, one per 32 elements (spec §5).
  TensorView q_scales;  // [B, Sq, Hq, Dqk/32]
  TensorView k_scales;  // [B, Sk, Hkv, Dqk/32]
  TensorView v_scales;  // by v_scale_axis
  VScaleAxis v_scale_axis = VScaleAxis::head_dim;

  Causal causal = Causal::none;
  TensorView prefix_offset;    // int32 [B], with Causal::prefix
  TensorView kv_len;           // int32 [B], optional (default: Sk)
  int64_t window = -1;         // sliding window W >= 0; negative: none
  std::optional<float> scale;  // default 1/sqrt(Dqk)

  PagedKv paged;
  SparseLayout sparse;
  TensorView k_mean;  // optional f32 [B, Hkv, Dqk]: the mean key removed by K smoothing

  SplitOptions split;
};

struct RunOptions {
  Engine engine = Engine::automatic;
  int threads = 0;         // CPU threads; 0 = all hardware threads
  void* stream = nullptr;  // cudaStream_t for the CUDA engine
};

// Validates every argument, then runs. On error nothing is written and the message names the
// argument, what was expected and what was found.
Status attention(const AttentionArgs& args, const RunOptions& options = {});

// Only the validation step.
Status validate(const AttentionArgs& args);

}  // namespace mxattn
