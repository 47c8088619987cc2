// The H200 decode engine: split-KV flash decoding over dense or paged KV caches stored as bf16, f16
// or OCP MX (E4M3, E5M2, E2M3, E3M2, E2M1 with E8M0 scales), with plan/run separation.
//
// A plan is built once on the host from an AttentionArgs whose metadata views (kv_len,
// prefix_offset, block_table) point to host memory; Q, K, V, O, LSE, the scales and the optional
// partial outputs may already point to device memory, since planning never reads them. The plan
// validates the problem (spec §7), copies the metadata and the tile schedule into a device
// workspace and allocates the f32 partial buffers. `run_decode` then only launches kernels: no
// allocation and no host synchronization, so a decode step can be captured in a CUDA graph and
// replayed, with new contents in the same buffers. The workspace (partials, and the per-tile
// counters of the combine the split kernel does itself) belongs to one run at a time: runs of one
// plan on two streams must be ordered; independent streams take a plan each.
//
// What the engine supports (anything else is refused by plan_decode with ErrorCode::unsupported):
// K and V of the same storage type; (Dqk, Dv) in {(64, 64), (128, 128), (256, 256), (192, 128)};
// K/V with a contiguous head dim and 16-byte aligned rows; scales contiguous and 16-byte aligned;
// tile_n a multiple of 16; page_size a multiple of 16; no block-sparse layout and no k_mean.
// Q, O and LSE may have any strides; Q may be f32, f16, bf16 or MX; O f32, f16 or bf16.
#pragma once

#include <cstdint>
#include <memory>

#include "mxattn/attention.h"
#include "mxattn/status.h"

namespace mxattn::cuda {

namespace detail {
struct PlanAccess;  // how the library fills a plan
}  // namespace detail

// Scheduling choices of the decode engine. None changes a result bit: every split is computed by
// the same code, in the same order, whichever CTA computes it.
struct DecodeOptions {
  // Consecutive splits of a query tile one CTA computes, its copy pipeline running on from one
  // split into the next: at most this many, the largest divisor of the tile's split count, so that
  // a tile's CTAs are of equal length (0: the engine's choice, up to 4 while the grid keeps nearly
  // two full waves of CTAs; 1: one split a CTA). The 16-bit caches' kernels only: MX kernels
  // always compute one split a CTA.
  int32_t splits_per_cta = 0;
  // MX caches with V scales along the head dim, where a CTA's packed rows (query rows
  // of its tile times the GQA group) number at most 8: the narrow kernel, whose products are
  // transposed so that keys fill the tensor cores' 16-row side. false: the general kernel, for
  // comparisons. No other choice changes a kernel's results' tolerance, but the two kernels round P
  // differently (f16 against bf16), so their bits differ.
  bool narrow_mx = true;
};

class DecodePlan {
 public:
  DecodePlan();
  DecodePlan(DecodePlan&&) noexcept;
  DecodePlan& operator=(DecodePlan&&) noexcept;
  ~DecodePlan();  // frees the device workspace

  bool ready() const { return impl_ != nullptr; }
  // Split slots S of the partial buffers: the largest split count of any query tile.
  int64_t partial_slots() const;
  // The partition's query and key tiles (spec §3): the caller's SplitOptions, or the engine's
  // defaults (docs/spec.md lists them).
  int64_t tile_m() const;
  int64_t tile_n() const;
  // Number of CTAs the split kernel launches, and whether the splits' partials are combined: by
  // the split kernel itself (the last CTA of each query tile), or, when the caller asked for the
  // partials or the counts, by a combine kernel after it.
  int64_t split_blocks() const;
  bool combines() const;

  struct Impl;
  const Impl* impl() const { return impl_.get(); }

 private:
  friend struct detail::PlanAccess;
  std::unique_ptr<Impl> impl_;
};

// Validates `args` (metadata views on the host) and builds the plan on the current CUDA device,
// replacing what `plan` held. On error `plan` is left as it was.
Status plan_decode(const AttentionArgs& args, DecodePlan* plan, const DecodeOptions& options);
Status plan_decode(const AttentionArgs& args, DecodePlan* plan);  // with DecodeOptions{}

// Runs the planned step on `stream` (a cudaStream_t; nullptr is the default stream), on the device
// the plan was built on.
// `device_args` must match the planned arguments in every dtype, shape and stride; its Q, K, V, O,
// LSE, scale and partial views point to device memory. Its metadata views are not read: the plan
// holds its own device copy.
Status run_decode(const DecodePlan& plan, const AttentionArgs& device_args, void* stream);

// Runs only the combine step over the partials the previous run_decode of this plan wrote (for the
// benchmark of the combine kernel on its own bytes). A no-op when the plan does not combine.
Status run_combine(const DecodePlan& plan, const AttentionArgs& device_args, void* stream);

}  // namespace mxattn::cuda
