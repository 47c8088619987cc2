// The arguments of one attention call as the Python layer hands them over: the views of the
// caller's arrays (which it keeps alive) and the options, in an AttentionArgs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "arrays.h"
#include "mxattn/attention.h"
#include "mxattn/ragged.h"

namespace mxattn::python {

class CallArgs {
 public:
  // Tensor arguments by their AttentionArgs name: q, k, v, q_scales, k_scales, v_scales, k_mean
  // (data, on the host or one GPU), kv_len, prefix_offset, block_table, row_ptr, col_idx
  // (metadata, read on the host by validation and planning, so host memory).
  void set_input(const std::string& name, const InputArray& array, const std::string& type);
  // o, lse, partial_o, partial_lse, counts: data, on the same memory as the inputs.
  void set_output(const std::string& name, const OutputArray& array, const std::string& type);

  void set_options(const std::string& causal, int64_t window, std::optional<float> scale,
                   int64_t page_size, int32_t block_q, int32_t block_k,
                   const std::string& v_scale_axis, int32_t split_kv, int32_t tile_m,
                   int32_t tile_n, bool early_exit);

  const AttentionArgs& args() const { return args_; }
  // The ragged call (spec §10) over the same views: q and o [total_q, ...], lse [Hq, total_q],
  // kv_len as seq_lens, with the input named cu_seqlens_q.
  RaggedArgs ragged_args() const;
  // Where the data tensors live (the host when none is set yet).
  Placement placement() const { return placement_.value_or(Placement{}); }

 private:
  TensorView& slot(const std::string& name, bool output);
  void place(const std::string& name, Placement where, bool metadata);

  AttentionArgs args_;
  TensorView cu_seqlens_q_;
  std::optional<Placement> placement_;
  std::string placement_source_;
  std::map<std::string, InputArray> inputs_;  // held so the memory outlives every run
  std::map<std::string, OutputArray> outputs_;
};

}  // namespace mxattn::python
