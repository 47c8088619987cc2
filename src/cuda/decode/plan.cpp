// The plan of the CUDA decode engine (what it supports; tables, tile schedule and partial buffers
// in one device workspace) and its launches. Problems arrive validated (src/api); kernels never
// check arguments.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cuda/common/api_util.h"
#include "cuda/common/head_dims.h"
#include "cuda/common/plan_access.h"
#include "cuda/decode/engine.h"
#include "cuda/decode/kernels.h"
#include "cuda/decode/params.h"
#include "mxattn/cuda.h"

namespace mxattn::cuda {

struct DecodePlan::Impl {
  AttentionArgs planned;  // the views as planned; its host metadata is not read after planning
  detail::DecodeParams params;
  detail::KernelRef split;
  int64_t tile_m = 0;
  int64_t tile_n = 0;
  int64_t work_items = 0;
  int64_t slots = 0;
  bool combines = false;
  bool fused_combine = false;  // the split kernel combines (DecodeParams::arrivals)
  detail::DeviceWorkspace workspace;
};

DecodePlan::DecodePlan() = default;
DecodePlan::DecodePlan(DecodePlan&&) noexcept = default;
DecodePlan& DecodePlan::operator=(DecodePlan&&) noexcept = default;
DecodePlan::~DecodePlan() = default;

int64_t DecodePlan::partial_slots() const {
  return impl_ ? impl_->slots : 0;
}
int64_t DecodePlan::tile_m() const {
  return impl_ ? impl_->tile_m : 0;
}
int64_t DecodePlan::tile_n() const {
  return impl_ ? impl_->tile_n : 0;
}
int64_t DecodePlan::split_blocks() const {
  return impl_ ? impl_->work_items * impl_->params.heads_kv * impl_->params.row_blocks : 0;
}
bool DecodePlan::combines() const {
  return impl_ && impl_->combines;
}

namespace {

using detail::aligned;
using detail::cat;
using detail::copy_strides;
using detail::cuda_failure;

bool is_contiguous(const TensorView& v) {
  TensorView c = v;
  set_contiguous_strides(c);
  for (int i = 0; i < v.rank; ++i)
    if (v.shape[i] > 1 && v.stride[i] != c.stride[i]) return false;
  return true;
}

// K or V rows must be whole 16-byte copies: contiguous head dim, rows and base 16-byte aligned.
Status check_kv_rows(const char* name, const TensorView& v) {
  if (v.stride[3] != 1 && v.shape[3] > 1) {
    return Status::unsupported(
        cat(name, ": the CUDA decode engine needs a contiguous head dim (stride 1); found stride ",
            v.stride[3]));
  }
  for (int i = 0; i < 3; ++i) {
    if ((v.stride[i] * bits_of(v.dtype) / 8) % 16 != 0) {
      return Status::unsupported(
          cat(name, ": the CUDA decode engine needs rows 16-byte aligned; stride ", v.stride[i],
              " of axis ", i, " is not a multiple of 16 bytes"));
    }
  }
  if (!aligned(v.data, 16)) {
    return Status::unsupported(
        cat(name, ": the CUDA decode engine needs a 16-byte aligned pointer"));
  }
  return Status::ok();
}

Status check_scales(const char* name, const TensorView& v) {
  if (!v.given()) return Status::ok();
  if (!is_contiguous(v)) {
    return Status::unsupported(cat(name, ": the CUDA decode engine needs contiguous scales"));
  }
  if (!aligned(v.data, 16)) {
    return Status::unsupported(
        cat(name, ": the CUDA decode engine needs a 16-byte aligned pointer"));
  }
  return Status::ok();
}

}  // namespace

Status decode::check_support(const core::Problem& p, const core::SplitParams& split) {
  const AttentionArgs& a = p.args;
  if (p.sparse) {
    return Status::unsupported(
        "sparse: the CUDA decode engine does not support block-sparse layouts");
  }
  if (a.k_mean.given()) {
    return Status::unsupported("k_mean: the CUDA decode engine does not support K smoothing");
  }
  if (a.k.dtype != a.v.dtype) {
    return Status::unsupported(
        cat("K and V: the CUDA decode engine needs one storage type for both; found ",
            name_of(a.k.dtype), " and ", name_of(a.v.dtype)));
  }
  if (a.k.dtype == DType::f32) {
    return Status::unsupported(
        "K and V: the CUDA decode engine reads bf16, f16 or MX caches; found f32");
  }
  if (detail::split_kernel(a.k.dtype, p.dim_qk, p.dim_v, false).function == nullptr) {
    return Status::unsupported(cat("head dims: the CUDA decode engine supports (Dqk, Dv) = ",
                                   head_dims_text(), "; found (", p.dim_qk, ", ", p.dim_v, ")"));
  }
  if (Status st = check_kv_rows("K", a.k); !st) return st;
  if (Status st = check_kv_rows("V", a.v); !st) return st;
  if (Status st = check_scales("K scales", a.k_scales); !st) return st;
  if (Status st = check_scales("V scales", a.v_scales); !st) return st;
  if (p.paged && p.page_size % detail::kStepKeys != 0) {
    return Status::unsupported(cat("paged: the CUDA decode engine needs page_size a multiple of ",
                                   detail::kStepKeys, "; found ", p.page_size));
  }
  if (split.tile_n % detail::kStepKeys != 0) {
    return Status::unsupported(cat("split: the CUDA decode engine needs tile_n a multiple of ",
                                   detail::kStepKeys, "; found ", split.tile_n));
  }
  return Status::ok();
}

namespace {

// The device arguments of a run must be the planned ones with device pointers.
Status check_run_args(const DecodePlan::Impl& plan, const AttentionArgs& d) {
  if (Status st = detail::check_same_views(plan.planned, d); !st) return st;
  if (!aligned(d.k.data, 16) || !aligned(d.v.data, 16)) {
    return Status::invalid("k, v: the run's pointers must be 16-byte aligned, as planned");
  }
  if ((d.k_scales.given() && !aligned(d.k_scales.data, 16)) ||
      (d.v_scales.given() && !aligned(d.v_scales.data, 16))) {
    return Status::invalid(
        "k_scales, v_scales: the run's pointers must be 16-byte aligned, as planned");
  }
  return Status::ok();
}

// The planned parameters with the run's data pointers.
detail::DecodeParams params_for(const DecodePlan::Impl& plan, const AttentionArgs& d) {
  detail::DecodeParams p = plan.params;
  p.q = d.q.data;
  p.q_rows_vectorized = (p.q_dtype == DType::bf16 || p.q_dtype == DType::f16) &&
                        p.q_stride[3] == 1 && p.q_stride[0] % 8 == 0 && p.q_stride[1] % 8 == 0 &&
                        p.q_stride[2] % 8 == 0 && reinterpret_cast<uintptr_t>(d.q.data) % 16 == 0;
  p.q_scales = static_cast<const uint8_t*>(d.q_scales.data);
  p.k = static_cast<const uint8_t*>(d.k.data);
  p.v = static_cast<const uint8_t*>(d.v.data);
  p.k_scales = static_cast<const uint8_t*>(d.k_scales.data);
  p.v_scales = static_cast<const uint8_t*>(d.v_scales.data);
  p.o = d.o.data;
  p.lse = static_cast<float*>(d.lse.data);
  if (d.split.partial_o.given()) {
    p.part_o = static_cast<float*>(d.split.partial_o.data);
    p.part_lse = static_cast<float*>(d.split.partial_lse.data);
  }
  p.counts = static_cast<int32_t*>(d.split.counts.data);
  return p;
}

// The auto chain (DecodeOptions::splits_per_cta 0): at most kMaxAutoChain splits a CTA, and only
// while the grid keeps at least kMinChainWaves waves of resident CTAs, its last wave at least
// kMinWaveFill full.
constexpr int64_t kMaxAutoChain = 4;
constexpr double kMinChainWaves = 1.9;
constexpr double kMinWaveFill = 0.9;

}  // namespace

namespace decode {

Status build_plan(const core::Problem& p, const core::SplitParams& split,
                  const DecodeOptions& options, DecodePlan* plan) {
  const AttentionArgs& args = p.args;
  if (Status st = check_support(p, split); !st) return st;
  const int64_t slots = core::partial_slots(p, split);
  if (Status st = core::validate_partial_slots(args, slots); !st) return st;

  auto impl = std::make_unique<DecodePlan::Impl>();
  impl->planned = args;
  impl->slots = slots;
  impl->tile_m = split.tile_m;
  impl->tile_n = split.tile_n;
  detail::DecodeParams& d = impl->params;

  // The tile schedule: every query tile's partition, and one CTA per split that writes anything.
  const bool user_partials = args.split.partial_o.given();
  const int64_t q_tiles = core::query_tiles_per_head(p, split);
  std::vector<detail::TileInfo> tiles(size_t(p.batch * q_tiles));
  std::vector<detail::WorkItem> work;
  std::vector<int64_t> launched_of_tile;  // work items of each tile, in order
  bool any_combine = false;
  for (int64_t b = 0; b < p.batch; ++b) {
    const core::Visibility vis = p.visibility(b);
    for (int64_t t = 0; t < q_tiles; ++t) {
      const core::QueryTile qt = core::query_tile(p, split, b, 0, t);
      tiles[size_t(b * q_tiles + t)] = {qt.run.begin, qt.run.count, int32_t(qt.splits),
                                        int32_t(qt.count)};
      any_combine = any_combine || qt.count >= 2;
      const int64_t launched =
          user_partials && !split.early_exit ? qt.splits : std::max<int64_t>(1, qt.count);
      launched_of_tile.push_back(launched);
      for (int64_t s = 0; s < launched; ++s) {
        detail::WorkItem w;
        w.b = int32_t(b);
        w.q_tile = int32_t(t);
        w.split = int32_t(s);
        w.last = vis.last;
        w.offset = vis.offset;
        w.count = int32_t(qt.count);
        work.push_back(w);
      }
    }
  }
  const int64_t tile_rows = std::min(split.tile_m, p.seq_q);
  const bool narrow = options.narrow_mx && args.v_scale_axis == VScaleAxis::head_dim &&
                      tile_rows * p.group <= detail::kNarrowRows;
  impl->split = detail::split_kernel(args.k.dtype, p.dim_qk, p.dim_v, narrow);
  int device = 0;
  if (Status st =
          detail::current_device_with_smem("the split kernel", impl->split.smem_bytes, &device);
      !st) {
    return st;
  }
  if (cudaError_t e =
          cudaFuncSetAttribute(impl->split.function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               impl->split.smem_bytes);
      e != cudaSuccess) {
    return cuda_failure("split kernel attributes", e);
  }

  const int64_t row_blocks =
      (tile_rows * p.group + detail::kRowsPerBlock - 1) / detail::kRowsPerBlock;

  // Chains: a CTA computes consecutive splits of its tile, its copies running on from one split
  // into the next, so that a split's pipeline start costs less. No
  // result bit depends on it. A tile's chains are of equal length (the largest divisor of its split
  // count up to the chain asked for): CTAs of unequal length left a ragged last wave.
  const auto chain_of = [](int64_t launched, int64_t chain) {
    int64_t n = std::min(chain, launched);
    while (launched % n != 0) --n;
    return n;
  };
  const auto chained_ctas = [&](int64_t chain) {
    int64_t ctas = 0;
    for (const int64_t launched : launched_of_tile) ctas += launched / chain_of(launched, chain);
    return ctas * p.heads_kv * row_blocks;
  };
  int64_t chain = 1;
  if (impl->split.chains) {
    if (options.splits_per_cta > 0) {
      chain = options.splits_per_cta;
    } else {
      // The engine's choice: the longest chain (up to kMaxAutoChain) that still leaves nearly two
      // full waves of resident CTAs, measured best on the H200 (a 1.3-wave grid lost 25%).
      int sms = 0, per_sm = 0;
      if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
          e != cudaSuccess) {
        return cuda_failure("device attributes", e);
      }
      if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &per_sm, impl->split.function, detail::kWarps * 32, size_t(impl->split.smem_bytes));
          e != cudaSuccess) {
        return cuda_failure("split kernel occupancy", e);
      }
      const double resident = double(std::max(1, sms * per_sm));
      for (int64_t c = kMaxAutoChain; c > 1; --c) {
        const double waves = double(chained_ctas(c)) / resident;
        if (waves >= kMinChainWaves && waves / std::ceil(waves) >= kMinWaveFill) {
          chain = c;
          break;
        }
      }
    }
  }
  if (chain > 1) {
    // The work items of a tile are consecutive: splits 0, 1, ...
    std::vector<detail::WorkItem> chained;
    size_t first = 0;
    for (const int64_t launched : launched_of_tile) {
      const int64_t n = chain_of(launched, chain);
      for (int64_t s = 0; s < launched; s += n) {
        detail::WorkItem w = work[first + size_t(s)];
        w.chain = int32_t(n);
        chained.push_back(w);
      }
      first += size_t(launched);
    }
    work = std::move(chained);
  }
  // Each CTA's keys (WorkItem::keys), from the shared partition; what the kernel's
  // threads would otherwise each compute before their first copy.
  for (detail::WorkItem& w : work) {
    const core::Visibility vis = p.visibility(w.b);
    // The tile's partition, as the combine reads it.
    const detail::TileInfo& tile = tiles[size_t(int64_t(w.b) * q_tiles + w.q_tile)];
    const core::TileRun run{tile.run_begin, tile.run_count};
    const int64_t iters = core::split_iters(run.count, tile.splits);
    const core::TileRun keys = core::consecutive_split_tiles(run, iters, w.split, w.chain);
    const int64_t row_first = int64_t(w.q_tile) * split.tile_m;
    const int64_t row_last = std::min(row_first + split.tile_m, p.seq_q) - 1;
    detail::CtaKeys& k = w.keys;
    k.key_begin = keys.begin * split.tile_n;
    k.split_keys = iters * split.tile_n;
    k.load_lo = std::max(k.key_begin, vis.lo(row_first));
    k.load_hi = std::min((keys.begin + keys.count) * split.tile_n - 1, vis.hi(row_last));
    k.full_lo = std::max(k.load_lo, vis.lo(row_last));
    k.full_hi = std::min(k.load_hi, vis.hi(row_first));
  }
  if (p.heads_kv * row_blocks > 65535 || int64_t(work.size()) > int64_t(INT32_MAX)) {
    return Status::unsupported(
        "grid: the problem needs more CTAs than one launch of the CUDA decode engine holds");
  }

  impl->combines = any_combine || args.split.counts.given();
  const bool internal_partials = any_combine && !user_partials;

  detail::WorkspaceLayout layout;
  const int64_t at_tiles = layout.take(int64_t(tiles.size() * sizeof(detail::TileInfo)));
  const int64_t at_work = layout.take(int64_t(work.size() * sizeof(detail::WorkItem)));
  const std::vector<int32_t> block_table = detail::read_block_table(p, args.paged.block_table);
  const int64_t at_table = layout.take(int64_t(block_table.size() * sizeof(int32_t)));
  const int64_t at_part_o = layout.take(internal_partials ? detail::partial_o_bytes(p, slots) : 0);
  const int64_t at_part_lse =
      layout.take(internal_partials ? detail::partial_lse_bytes(p, slots) : 0);
  // The split kernel combines its own partials (no second kernel, which costs a launch and a grid
  // drain on small problems) unless the user asked for the partials or the counts, which the
  // combine kernel writes for every row.
  impl->fused_combine = internal_partials && !args.split.counts.given();
  const int64_t arrivals = impl->fused_combine ? p.batch * q_tiles * p.heads_kv * row_blocks : 0;
  const int64_t at_arrivals = layout.take(arrivals * int64_t(sizeof(int32_t)));

  const detail::DeviceWorkspace& ws = impl->workspace;
  if (Status st = impl->workspace.allocate(layout.bytes); !st) return st;
  for (const Status& st :
       {ws.upload(at_tiles, tiles), ws.upload(at_work, work), ws.upload(at_table, block_table),
        ws.zero(at_arrivals, arrivals * int64_t(sizeof(int32_t)))}) {
    if (!st) return st;
  }
  if (impl->fused_combine) d.arrivals = reinterpret_cast<int32_t*>(ws.at(at_arrivals));

  d.q_dtype = args.q.dtype;
  d.q_split_lo = args.q.dtype == DType::f32 ||
                 (args.q.dtype == DType::f16 && args.k.dtype == DType::bf16) ||
                 (args.q.dtype == DType::bf16 && args.k.dtype == DType::f16);
  copy_strides(args.q, d.q_stride);
  copy_strides(args.q_scales, d.q_scale_stride);
  for (int i = 0; i < 3; ++i) {
    d.k_stride[i] = args.k.stride[i] * bits_of(args.k.dtype) / 8;
    d.v_stride[i] = args.v.stride[i] * bits_of(args.v.dtype) / 8;
  }
  d.v_scales_along_keys = args.v_scale_axis == VScaleAxis::keys;
  d.kv_slots = p.paged ? p.page_size : p.seq_k;
  d.o_dtype = args.o.dtype;
  copy_strides(args.o, d.o_stride);
  copy_strides(args.lse, d.lse_stride);
  if (user_partials) {
    copy_strides(args.split.partial_o, d.part_o_stride);
    copy_strides(args.split.partial_lse, d.part_lse_stride);
  } else if (internal_partials) {
    detail::set_internal_partials(p, ws.at(at_part_o), ws.at(at_part_lse), d);
  }
  d.write_all_partials = user_partials;
  copy_strides(args.split.counts, d.counts_stride);

  d.tiles = reinterpret_cast<const detail::TileInfo*>(ws.at(at_tiles));
  d.work = reinterpret_cast<const detail::WorkItem*>(ws.at(at_work));
  d.block_table = p.paged ? reinterpret_cast<const int32_t*>(ws.at(at_table)) : nullptr;
  d.block_table_stride = p.max_pages;

  d.batch = p.batch;
  d.seq_q = p.seq_q;
  d.heads_q = p.heads_q;
  d.heads_kv = p.heads_kv;
  d.group = p.group;
  d.dim_v = p.dim_v;
  d.page_size = p.paged ? p.page_size : 0;
  d.causal = args.causal != Causal::none;
  d.window = args.window;
  d.scale_log2 = float(double(p.scale) * 1.4426950408889634);
  d.tile_m = split.tile_m;
  d.tile_n = split.tile_n;
  d.q_tiles = q_tiles;
  d.row_blocks = row_blocks;
  // An empty problem (no batch entry, query row or head) launches nothing.
  impl->work_items = p.batch * p.seq_q * p.heads_q == 0 ? 0 : int64_t(work.size());

  detail::PlanAccess::set(plan, std::move(impl));
  return Status::ok();
}

}  // namespace decode

Status run_decode(const DecodePlan& plan, const AttentionArgs& device_args, void* stream) {
  const DecodePlan::Impl* impl = plan.impl();
  if (impl == nullptr) return Status::invalid("plan: run_decode needs a plan built by plan_decode");
  if (Status st = check_run_args(*impl, device_args); !st) return st;
  if (impl->work_items == 0) return Status::ok();
  detail::DecodeParams params = params_for(*impl, device_args);
  const dim3 grid(unsigned(impl->work_items), unsigned(params.heads_kv * params.row_blocks));
  if (Status st = detail::launch(impl->split, grid, dim3(detail::kWarps * 32), params, stream); !st)
    return st;
  if (!impl->combines || impl->fused_combine) return Status::ok();
  return detail::launch_combine(params, stream, true);
}

Status run_combine(const DecodePlan& plan, const AttentionArgs& device_args, void* stream) {
  const DecodePlan::Impl* impl = plan.impl();
  if (impl == nullptr)
    return Status::invalid("plan: run_combine needs a plan built by plan_decode");
  if (Status st = check_run_args(*impl, device_args); !st) return st;
  if (!impl->combines || impl->work_items == 0) return Status::ok();
  detail::DecodeParams params = params_for(*impl, device_args);
  return detail::launch_combine(params, stream);
}

}  // namespace mxattn::cuda
