// The flags that describe one attention problem, shared by `mxattn run` and `mxattn plan` (in the
// spirit of rocmlir-gen's).
#pragma once

#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "cli.h"
#include "workload/problem.h"

namespace mxattn::tools {

// `--engine auto|cpu|reference|cuda`, as `mxattn run` and `mxattn plan` both take it.
void add_engine_flag(FlagParser& flags, Engine* engine);

class ProblemFlags {
 public:
  // Registers the flags, with `spec`'s current values as the defaults (a sparse layout's blocks
  // 64 x 64 where the spec has none).
  ProblemFlags(FlagParser& flags, workload::Spec* spec);

  // After parsing: checks what the parser cannot and fills the spec (and the loaded inputs).
  // Returns an exit code on failure (the one-line message already printed).
  std::optional<int> finish(const FlagParser& flags);

  workload::Inputs inputs() const;

 private:
  workload::Spec* spec_;
  int64_t batch_, seq_q_, seq_k_, heads_q_, heads_kv_, dim_qk_, dim_v_, window_, page_size_;
  int64_t block_q_, block_k_, tile_m_, tile_n_, split_target_;
  double sparse_density_;
  int64_t seed_;
  std::string split_kv_;
  std::vector<int64_t> prefix_offset_, kv_len_;
  std::string q_path_, k_path_, v_path_, layout_path_;
  base::HostTensor q_file_, k_file_, v_file_, row_ptr_file_, col_idx_file_;
};

}  // namespace mxattn::tools
