// Seeded random attention problems of every feature, owning their buffers: what `mxattn run`, the
// benchmarks and the tests run. A Workload holds the unquantized f32 inputs (for the quantization
// error), the stored inputs in the requested formats and layouts, the outputs, and the metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/attention.h"
#include "mxattn/mx.h"

namespace mxattn::workload {

struct Config {
  int64_t batch = 1;
  int64_t seq_q = 1;
  int64_t seq_k = 8192;
  int64_t heads_q = 32;
  int64_t heads_kv = 8;
  int64_t dim_qk = 128;
  int64_t dim_v = 128;
  DType q_format = DType::bf16;
  DType k_format = DType::e4m3;
  DType v_format = DType::e4m3;
  DType o_format = DType::bf16;
  VScaleAxis v_scale_axis = VScaleAxis::head_dim;
  ScaleMode scale_mode = ScaleMode::floor;

  Causal causal = Causal::none;
  std::vector<int32_t> prefix_offset;  // one per batch entry, or one for all
  std::vector<int32_t> kv_len;         // one per batch entry, or one for all; empty: seq_k
  int64_t window = -1;
  bool return_lse = true;

  int64_t page_size = 0;  // 0: dense KV

  double sparse_density = 0;  // 0: dense; else the share of key blocks listed per query block
  int32_t block_q = 64;
  int32_t block_k = 64;

  int32_t split_kv = 0;  // 0: auto
  int32_t tile_m = 0;
  int32_t tile_n = 0;
  int32_t auto_target = 0;  // split_kv auto: key tiles per split; 0: the engine's choice
  bool early_exit = false;

  bool hadamard = false;  // rotate Q and K (producer side) before quantizing
  bool smooth_k = false;  // subtract the mean key before quantizing; the engine gets k_mean
  float k_outlier = 0;    // offset added to a few K channels (real keys have such channels)

  uint64_t seed = 1;
};

// Given inputs instead of random ones: f32, f16 or bf16, contiguous BSHD, with the config's shapes;
// and a given block-sparse layout (SPEC 6: int32 row_ptr [Bx, Hx, query blocks + 1] and col_idx
// [Bx, Hx, nnz_max], contiguous, blocks of the config's block_q x block_k), which the library
// validates like any other.
struct Inputs {
  const TensorView* q = nullptr;
  const TensorView* k = nullptr;
  const TensorView* v = nullptr;
  const TensorView* row_ptr = nullptr;
  const TensorView* col_idx = nullptr;
};

class Workload {
 public:
  // Builds every buffer of `config`: the inputs (random N(0, 1) from the seed, or `inputs` where
  // given), quantized to the requested formats, laid out dense or paged; outputs poisoned with NaN.
  static Status build(const Config& config, Workload* out, const Inputs& inputs = {});

  const Config& config() const { return config_; }

  // The arguments of the stored problem, writing to this workload's outputs.
  const AttentionArgs& args() const { return args_; }

  // The same problem on the unquantized f32 inputs (dense KV), writing to `o` and `lse`: the
  // reference on these against the reference on args() is the quantization error of SPEC 9.
  AttentionArgs unquantized_args(const TensorView& o, const TensorView& lse) const;

  // Sets every output element to NaN, so that an element an engine fails to write shows.
  void poison_outputs();

  // FLOPs of the problem: 2 * (Dqk + Dv) per visible (query row, key) pair, per query head.
  double flops() const;
  // Bytes an engine must move at least: Q, the valid keys' K and V (scales included), O and LSE.
  double min_bytes() const;

  std::string describe() const;

 private:
  Config config_;
  AttentionArgs args_;
  base::HostTensor q_src_, k_src_, v_src_;  // f32, dense, before quantization
  base::HostTensor q_, k_, v_, q_scales_, k_scales_, v_scales_;
  base::HostTensor o_, lse_;
  base::HostTensor kv_len_, prefix_offset_, block_table_, row_ptr_, col_idx_, k_mean_;
};

}  // namespace mxattn::workload
