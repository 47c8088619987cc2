// Random sequence-parallel cases for the MPI and NCCL tests: a whole problem every rank builds from
// the same seed, how the ranks shard it and how it runs; the whole problem quantized in one
// process (what quantize-before-send must reproduce); and the check of gathered inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/dist.h"
#include "workload/problem.h"

namespace mxattn::test {

struct Case {
  workload::Spec spec = workload::decode_step();
  std::vector<int64_t> q_lengths;
  std::vector<int64_t> kv_lengths;
  Engine engine = Engine::cpu_reference;
  dist::SendQuantization quantization;

  std::string describe(const workload::Problem& w) const;
};

// Uneven (some empty) shards over `ranks`, GQA ratios with fewer KV heads than ranks, every
// storage type, both V scale layouts, every mask, sparse layouts, both CPU engines.
Case random_case(uint64_t seed, int ranks);

// A random case with plain Q, K and V that the senders quantize (Q sometimes), shards not aligned
// to blocks of 32 keys.
Case quantize_on_send_case(uint64_t seed, int ranks);

// A random case with MX V whose scales run along the keys, travelling as stored.
Case mx_v_along_keys_case(uint64_t seed, int ranks);

// The whole problem of a quantize-on-send case quantized in one process: `args` are the gathered
// tensors, `plain` what the shards are cut from.
struct QuantizedWhole {
  base::HostTensor q, q_scales, k, k_scales, v, v_scales;
  AttentionArgs args;
  AttentionArgs plain;
};
Status quantize_whole(const AttentionArgs& plain, const Case& c, QuantizedWhole* out);

bool same_bytes(const TensorView& want, const TensorView& got);

// The gathered tensors (host memory) hold the whole tensors' bytes of the rank's heads, KV heads
// repeated as the local grouping needs, scales at logical size.
::testing::AssertionResult gathered_holds_whole_heads(const AttentionArgs& whole,
                                                      const AttentionArgs& gathered,
                                                      const dist::GatheredHeads& heads);

}  // namespace mxattn::test
