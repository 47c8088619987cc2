// The flags that describe one attention problem, shared by `mxattn run` and `mxattn plan` (in the
// spirit of rocmlir-gen's).
#pragma once

#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "cli.h"
#include "workload/workload.h"

namespace mxattn::tools {

// `--engine auto|cpu|reference|cuda`, as `mxattn run` and `mxattn plan` both take it.
void add_engine_flag(FlagParser& flags, Engine* engine);

class ProblemFlags {
 public:
  // Registers the flags, with `config`'s current values as the defaults.
  ProblemFlags(FlagParser& flags, workload::Config* config);

  // After parsing: checks what the parser cannot and fills the config (and the loaded inputs).
  // Returns an exit code on failure (the one-line message already printed).
  std::optional<int> finish(const FlagParser& flags);

  workload::Inputs inputs() const;

 private:
  workload::Config* config_;
  int64_t batch_, seq_q_, seq_k_, heads_q_, heads_kv_, dim_qk_, dim_v_, window_, page_size_;
  int64_t block_q_, block_k_, tile_m_ = 0, tile_n_ = 0, split_target_ = 0;
  int64_t seed_;
  std::string split_kv_ = "auto";
  std::vector<int64_t> prefix_offset_, kv_len_;
  std::string q_path_, k_path_, v_path_, layout_path_;
  base::HostTensor q_file_, k_file_, v_file_, row_ptr_file_, col_idx_file_;
};

}  // namespace mxattn::tools
