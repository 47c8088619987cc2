// The H200 prefill engine: exact attention forward for long query sequences on the tensor cores
// (warp-specialized TMA loads and wgmma, sm_90a), with spec §2's masks, GQA, split-KV and LSE, and
// plan/run separation.
//
// A plan is built once on the host from an AttentionArgs whose metadata views (kv_len,
// prefix_offset) point to host memory; Q, K, V, O, LSE and the optional partial outputs may already
// point to device memory, since planning never reads them. The plan validates the problem (spec
// §7), copies the metadata and the tile schedule into a device workspace and allocates the f32
// partial buffers when split-KV needs them. `run_prefill` then only launches kernels: no allocation
// and no host synchronization, so a run can be captured in a CUDA graph.
//
// What the engine supports (anything else is refused by plan_prefill with ErrorCode::unsupported):
// Q, K and V of one plain type, bf16 or f16, or MX types (every format, both V scale axes) with
// bf16 for those that are not MX; (Dqk, Dv) in {(64, 64), (128, 128), (256, 256), (192, 128)};
// dense or paged K/V; block-sparse layouts (the partition's key tile is then the layout's block);
// K smoothing (k_mean); tile_m and tile_n left to the engine or equal to prefill_tiles(). O may be
// f32, f16 or bf16 with any strides. Plain Q, K and V that the kernel reads in place need a
// contiguous head dim, strides of 16-byte multiples and 16-byte aligned pointers (what the bulk
// tensor copy engine reads). MX K and V are dequantized exactly into bf16 and paged K/V gathered
// into dense buffers of the plan's workspace by a copy kernel before the attention kernel, so
// the plan's workspace grows by those copies; MX Q (any strides of packed rows) is read as codes
// and dequantized on chip by the attention kernel, to the same bf16 values.
#pragma once

#include <cstdint>
#include <memory>

#include "mxattn/attention.h"
#include "mxattn/status.h"

namespace mxattn::cuda {

// The engine's query and key tile for head dims (dim_qk, dim_v): spec §3's tile_m and tile_n of
// its split partition. {0, 0} for head dims it has no kernel for.
struct PrefillTiles {
  int64_t tile_m = 0;
  int64_t tile_n = 0;
};
PrefillTiles prefill_tiles(int64_t dim_qk, int64_t dim_v);

namespace detail {
struct PlanAccess;  // how the library fills a plan
}  // namespace detail

class PrefillPlan {
 public:
  PrefillPlan();
  PrefillPlan(PrefillPlan&&) noexcept;
  PrefillPlan& operator=(PrefillPlan&&) noexcept;
  ~PrefillPlan();  // frees the device workspace

  bool ready() const { return impl_ != nullptr; }
  // Split slots S of the partial buffers: the largest split count of any query tile.
  int64_t partial_slots() const;
  // CTAs of the attention kernel, and whether a combine kernel runs after it.
  int64_t ctas() const;
  bool combines() const;

  struct Impl;
  const Impl* impl() const { return impl_.get(); }

 private:
  friend struct detail::PlanAccess;
  std::unique_ptr<Impl> impl_;
};

// Validates `args` (metadata views on the host) and builds the plan on the current CUDA device,
// replacing what `plan` held. On error `plan` is left as it was.
Status plan_prefill(const AttentionArgs& args, PrefillPlan* plan);

// Runs the planned attention on `stream` (a cudaStream_t; nullptr is the default stream), on the
// device the plan was built on. `device_args` must match the planned arguments in every dtype,
// shape and stride; its Q, K, V, O, LSE and partial views point to device memory. Its metadata
// views are not read: the plan holds its own device copy.
Status run_prefill(const PrefillPlan& plan, const AttentionArgs& device_args, void* stream);

}  // namespace mxattn::cuda
