// The plan of the CUDA prefill engine (what it supports; tables, work list and partial buffers in
// one device workspace) and its launches. Problems arrive validated (src/api); kernels never check
// arguments.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cuda/combine/combine.h"
#include "cuda/common/api_util.h"
#include "cuda/common/head_dims.h"
#include "cuda/common/plan_access.h"
#include "cuda/prefill/dense_inputs.h"
#include "cuda/prefill/engine.h"
#include "cuda/prefill/k_smoothing.h"
#include "cuda/prefill/kernels.h"
#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/schedule.h"
#include "mxattn/cuda_prefill.h"

namespace mxattn::cuda {

struct PrefillPlan::Impl {
  AttentionArgs planned;  // the views as planned; its host metadata is not read after planning
  prefill::PrefillParams params;
  prefill::KernelEntry kernel;
  detail::CombineParams combine_params;  // the combine kernel merges the partials
  // Q, K and V (in that order): MX K/V and paged caches are first copied into dense workspace
  // buffers; MX Q is read as codes by the kernel (q_codes), which dequantizes it on chip.
  bool copied[3] = {};
  bool q_codes = false;
  bool q_strides_aligned = false;  // MX Q: every stride keeps a group's alignment (mx_group_align)
  prefill::DenseInputParams dense_inputs[3];
  // K smoothing: the final LSE is shifted back once everything else has run.
  bool shifts_lse = false;
  prefill::LseShiftParams lse_shift;
  int64_t work_items = 0;
  int64_t grid_heads = 1;  // gridDim.y: the query heads, or 1 when each work item names its head
  int64_t slots = 0;
  bool combines = false;
  detail::DeviceWorkspace workspace;
};

PrefillPlan::PrefillPlan() = default;
PrefillPlan::PrefillPlan(PrefillPlan&&) noexcept = default;
PrefillPlan& PrefillPlan::operator=(PrefillPlan&&) noexcept = default;
PrefillPlan::~PrefillPlan() = default;

int64_t PrefillPlan::partial_slots() const {
  return impl_ ? impl_->slots : 0;
}
int64_t PrefillPlan::ctas() const {
  return impl_ ? impl_->work_items * impl_->grid_heads : 0;
}
bool PrefillPlan::combines() const {
  return impl_ && impl_->combines;
}

namespace {

using detail::aligned;
using detail::cat;
using detail::copy_strides;
using detail::cuda_failure;

// The bulk tensor copy engine reads Q, K and V: a contiguous head dim, the other strides whole
// 16-byte multiples below 2^40 bytes, a 16-byte aligned base.
Status check_tma_view(const char* name, const TensorView& v) {
  if (v.stride[3] != 1) {
    return Status::unsupported(
        cat(name, ": the CUDA prefill engine needs a contiguous head dim (stride 1); found stride ",
            v.stride[3]));
  }
  const int64_t bytes = bits_of(v.dtype) / 8;
  for (int i = 0; i < 3; ++i) {
    if (v.shape[i] == 1) continue;
    if ((v.stride[i] * bytes) % 16 != 0 || v.stride[i] * bytes >= (int64_t(1) << 40)) {
      return Status::unsupported(cat(name, ": the CUDA prefill engine needs strides of 16-byte ",
                                     "multiples below 2^40 bytes; stride ", v.stride[i],
                                     " of axis ", i, " is not"));
    }
  }
  if (!aligned(v.data, 16)) {
    return Status::unsupported(
        cat(name, ": the CUDA prefill engine needs a 16-byte aligned pointer"));
  }
  return Status::ok();
}

// The element type the attention kernel reads: that of Q, K and V, bf16 or f16; bf16 when any of
// them is MX (dequantized exactly into bf16, whose range every scaled MX value needs). None when
// the types cannot meet.
std::optional<DType> kernel_element(const AttentionArgs& a) {
  const DType types[] = {a.q.dtype, a.k.dtype, a.v.dtype};
  std::optional<DType> plain;
  bool any_mx = false;
  for (const DType t : types) {
    if (is_mx(t)) {
      any_mx = true;
    } else if (t != DType::bf16 && t != DType::f16) {
      return std::nullopt;
    } else if (plain && *plain != t) {
      return std::nullopt;
    } else {
      plain = t;
    }
  }
  if (any_mx)
    return plain.value_or(DType::bf16) == DType::bf16 ? std::optional(DType::bf16) : std::nullopt;
  return plain;
}

// Whether input t (0: Q, 1: K, 2: V) is read by the kernel from a dense copy (dense_inputs.h)
// rather than in place: MX K and V, and K and V of a paged cache. MX Q is read in place as codes
// by the kernel that dequantizes it on chip (q_codes.cuh): each CTA reads its query tile once, so
// a copy would only add a pass over Q, where K and V, read by every query tile of their head, are
// worth dequantizing once.
bool copied_to_workspace(const core::Problem& p, int t) {
  const TensorView* inputs[3] = {&p.args.q, &p.args.k, &p.args.v};
  return t > 0 && (is_mx(inputs[t]->dtype) || p.paged);
}

// The kernel instance for a problem: MX Q takes the one that dequantizes it on chip (bf16, like
// every MX problem).
prefill::KernelEntry kernel_for(const core::Problem& p, std::optional<DType> element) {
  return is_mx(p.args.q.dtype)
             ? prefill::q_codes_kernel_entry(p.dim_qk, p.dim_v)
             : prefill::kernel_entry(element.value_or(p.args.q.dtype), p.dim_qk, p.dim_v);
}

// What this engine supports beyond spec validity; `element` is kernel_element(p.args).
Status check_kernel_support(const core::Problem& p, std::optional<DType> element,
                            const prefill::KernelEntry& kernel) {
  const AttentionArgs& a = p.args;
  if (!element) {
    return Status::unsupported(
        cat("Q, K and V: the CUDA prefill engine needs one plain type for all three (bf16 or f16), "
            "or MX types with bf16 for those that are not MX; found ",
            name_of(a.q.dtype), ", ", name_of(a.k.dtype), " and ", name_of(a.v.dtype)));
  }
  if (!kernel.found()) {
    return Status::unsupported(cat("head dims: the CUDA prefill engine supports (Dqk, Dv) = ",
                                   head_dims_text(), "; found (", p.dim_qk, ", ", p.dim_v, ")"));
  }
  // With a sparse layout the key tile of the partition is the layout's block (core::resolve_split).
  if ((a.split.tile_m != 0 && a.split.tile_m != kernel.tile_m) ||
      (!p.sparse && a.split.tile_n != 0 && a.split.tile_n != kernel.tile_n)) {
    return Status::unsupported(
        cat("split: the CUDA prefill engine's tiles for these head dims are ", "tile_m ",
            kernel.tile_m, " and tile_n ", kernel.tile_n, "; found tile_m ", a.split.tile_m,
            " and tile_n ", a.split.tile_n));
  }
  if (p.heads_q > 65535 || p.seq_q > INT32_MAX || p.seq_k > INT32_MAX || p.batch > INT32_MAX) {
    return Status::unsupported(
        "shape: the CUDA prefill engine handles at most 65535 query heads and 2^31 - 1 rows, "
        "keys and batch entries");
  }
  // MX K/V and paged caches reach the kernel through their dense copies in the workspace, MX Q as
  // codes that the kernel reads itself (any element strides of a packed, byte-aligned row).
  if (!is_mx(a.q.dtype)) {
    if (Status st = check_tma_view("Q", a.q); !st) return st;
  }
  if (!copied_to_workspace(p, 1)) {
    if (Status st = check_tma_view("K", a.k); !st) return st;
  }
  if (!copied_to_workspace(p, 2)) return check_tma_view("V", a.v);
  return Status::ok();
}

// Q, K or V strides of the first three axes for the tensor map; a size-one axis, never stepped
// along, gets the head dim's row length, which the copy engine accepts.
void copy_tma_strides(const TensorView& v, int64_t (&out)[3]) {
  for (int i = 0; i < 3; ++i) out[i] = v.shape[i] == 1 ? v.shape[3] : v.stride[i];
}

// The device arguments of a run must be the planned ones with device pointers.
Status check_run_args(const PrefillPlan::Impl& plan, const AttentionArgs& d) {
  if (Status st = detail::check_same_views(plan.planned, d); !st) return st;
  const TensorView* inputs[3] = {&d.q, &d.k, &d.v};
  for (int t = 0; t < 3; ++t) {
    if (!plan.copied[t] && !(t == 0 && plan.q_codes) && !aligned(inputs[t]->data, 16)) {
      return Status::invalid("q, k, v: the run's pointers must be 16-byte aligned, as planned");
    }
  }
  return Status::ok();
}

// Whether columns [d, d + n) (d a multiple of n) of every row of a view are one aligned run of
// n * elem_bytes bytes.
bool runs_ok(const TensorView& v, const void* data, int64_t elem_bytes, int64_t n) {
  if (v.stride[v.rank - 1] != 1) return false;
  for (int i = 0; i + 1 < v.rank; ++i)
    if (v.shape[i] > 1 && v.stride[i] % n != 0) return false;
  return aligned(data, uintptr_t(n * elem_bytes));
}

// The planned parameters with the run's data pointers.
prefill::PrefillParams params_for(const PrefillPlan::Impl& plan, const AttentionArgs& d) {
  prefill::PrefillParams p = plan.params;
  p.q = d.q.data;  // read in place, as codes where it is MX (copied_to_workspace)
  if (plan.q_codes) {
    p.q_scales = static_cast<const uint8_t*>(d.q_scales.data);
    p.q_aligned_groups =
        plan.q_strides_aligned && aligned(d.q.data, uintptr_t(prefill::mx_group_align(d.q.dtype)));
  }
  p.k = plan.copied[1] ? plan.dense_inputs[1].out : d.k.data;
  p.v = plan.copied[2] ? plan.dense_inputs[2].out : d.v.data;
  p.o = d.o.data;
  p.o_pairs = runs_ok(d.o, d.o.data, bits_of(d.o.dtype) / 8, 2);
  p.o_chunks = bits_of(d.o.dtype) == 16 && runs_ok(d.o, d.o.data, 2, 8);
  p.lse = static_cast<float*>(d.lse.data);
  if (d.split.partial_o.given()) {
    p.part_o = static_cast<float*>(d.split.partial_o.data);
    p.part_lse = static_cast<float*>(d.split.partial_lse.data);
    p.part_o_pairs = runs_ok(d.split.partial_o, p.part_o, 4, 2);
  }
  return p;
}

detail::CombineParams combine_params_for(const PrefillPlan::Impl& plan,
                                         const prefill::PrefillParams& run,
                                         const AttentionArgs& d) {
  detail::CombineParams c = plan.combine_params;
  c.o = run.o;
  c.lse = run.lse;
  c.part_o = run.part_o;
  c.part_lse = run.part_lse;
  c.counts = static_cast<int32_t*>(d.split.counts.data);
  return c;
}

}  // namespace

Status prefill::check_support(const core::Problem& p) {
  const std::optional<DType> element = kernel_element(p.args);
  return check_kernel_support(p, element, kernel_for(p, element));
}

Status prefill::build_plan(const core::Problem& p, const core::SplitParams& split,
                           PrefillPlan* plan) {
  const AttentionArgs& args = p.args;
  const std::optional<DType> kernel_type = kernel_element(args);
  const bool q_codes = is_mx(args.q.dtype);
  const prefill::KernelEntry kernel = kernel_for(p, kernel_type);
  if (Status st = check_kernel_support(p, kernel_type, kernel); !st) return st;
  const int64_t slots = core::partial_slots(p, split);
  if (Status st = core::validate_partial_slots(args, slots); !st) return st;

  auto impl = std::make_unique<PrefillPlan::Impl>();
  impl->planned = args;
  impl->slots = slots;
  impl->q_codes = q_codes;
  impl->kernel = kernel;

  // The tile schedule: every query tile's partition (for the combine), and one CTA for each split
  // that writes anything. The heads of one batch entry run one after another, so that a head's
  // query tiles share its K and V in L2.
  const bool user_partials = args.split.partial_o.given();
  const int64_t q_tiles = core::query_tiles_per_head(p, split);
  const prefill::Schedule schedule =
      prefill::build_schedule(p, split, kernel.tile_m, kernel.tile_n, user_partials);
  const std::vector<prefill::WorkItem>& work = schedule.work;
  if (int64_t(work.size()) > int64_t(INT32_MAX)) {
    return Status::unsupported(
        "grid: the problem needs more CTAs than one launch of the CUDA prefill engine holds");
  }
  const bool any_combine = schedule.any_combine;
  // A work item names its head when the layout differs per head; otherwise gridDim.y runs the
  // heads.
  impl->grid_heads = schedule.tile_heads > 1 ? 1 : p.heads_q;

  impl->combines = any_combine || args.split.counts.given();
  const bool internal_partials = any_combine && !user_partials;
  const int64_t partial_rows = p.batch * p.seq_q * p.heads_q;

  detail::WorkspaceLayout layout;
  const std::vector<prefill::TileInfo>& tiles = schedule.tiles;
  const std::vector<prefill::SparseTile>& steps = schedule.sparse_tiles;
  const int64_t at_tiles = layout.take(int64_t(tiles.size() * sizeof(prefill::TileInfo)));
  const int64_t at_work = layout.take(int64_t(work.size() * sizeof(prefill::WorkItem)));
  const int64_t at_steps = layout.take(int64_t(steps.size() * sizeof(prefill::SparseTile)));
  const int64_t at_part_o = layout.take(internal_partials ? detail::partial_o_bytes(p, slots) : 0);
  const int64_t at_part_lse =
      layout.take(internal_partials ? detail::partial_lse_bytes(p, slots) : 0);
  // The dense copies: Q [B, Sq, Hq, Dqk], K [B, Sk, Hkv, Dqk] and V [B, Sk, Hkv, Dv], each in the
  // kernel's element type, with the paged cache's block table and every kv_len beside them.
  const TensorView* inputs[3] = {&args.q, &args.k, &args.v};
  const DType element = *kernel_type;  // check_support refused the problems without one
  TensorView kernel_inputs[3];
  int64_t at_copy[3] = {};
  for (int t = 0; t < 3; ++t) {
    kernel_inputs[t] = *inputs[t];
    if (!copied_to_workspace(p, t)) continue;
    kernel_inputs[t].dtype = element;
    if (t > 0) {
      kernel_inputs[t].shape[0] = p.batch;
      kernel_inputs[t].shape[1] = p.seq_k;
    }
    set_contiguous_strides(kernel_inputs[t]);
    at_copy[t] = layout.take(kernel_inputs[t].numel() * 2);
  }
  std::vector<int32_t> kv_lens;
  if (copied_to_workspace(p, 1) || copied_to_workspace(p, 2)) {
    for (int64_t b = 0; b < p.batch; ++b) kv_lens.push_back(int32_t(p.kv_len(b)));
  }
  const std::vector<int32_t> block_table = detail::read_block_table(p, args.paged.block_table);
  const int64_t at_kv_lens = layout.take(int64_t(kv_lens.size() * sizeof(int32_t)));
  const int64_t at_block_table = layout.take(int64_t(block_table.size() * sizeof(int32_t)));
  // k_mean is metadata, read here on the host: its contiguous copy goes into the workspace.
  std::vector<float> k_mean;
  if (args.k_mean.given()) {
    const TensorView& km = args.k_mean;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads_kv; ++h)
        for (int64_t d = 0; d < p.dim_qk; ++d)
          k_mean.push_back(static_cast<const float*>(km.data)[base::offset_of(km, b, h, d)]);
  }
  const int64_t at_k_mean = layout.take(int64_t(k_mean.size() * sizeof(float)));

  int device = 0;
  if (Status st =
          detail::current_device_with_smem("the prefill kernel", kernel.smem_bytes, &device);
      !st) {
    return st;
  }
  if (cudaError_t e = kernel.prepare(); e != cudaSuccess) {
    return cuda_failure("prefill kernel attributes", e);
  }

  const detail::DeviceWorkspace& ws = impl->workspace;
  if (Status st = impl->workspace.allocate(layout.bytes); !st) return st;
  for (const Status& st :
       {ws.upload(at_tiles, tiles), ws.upload(at_work, work), ws.upload(at_steps, steps),
        ws.upload(at_k_mean, k_mean), ws.upload(at_kv_lens, kv_lens),
        ws.upload(at_block_table, block_table)}) {
    if (!st) return st;
  }

  const TensorView* scales[3] = {&args.q_scales, &args.k_scales, &args.v_scales};
  for (int t = 0; t < 3; ++t) {
    if (!copied_to_workspace(p, t)) continue;
    prefill::DenseInputParams& copy = impl->dense_inputs[t];
    impl->copied[t] = true;
    copy.dtype = inputs[t]->dtype;
    std::copy(inputs[t]->stride, inputs[t]->stride + 4, copy.stride);
    std::copy(scales[t]->stride, scales[t]->stride + 4, copy.scale_stride);
    copy.scales_along_slots = t == 2 && args.v_scale_axis == VScaleAxis::keys;
    std::copy(kernel_inputs[t].shape, kernel_inputs[t].shape + 4, copy.shape);
    copy.out = reinterpret_cast<uint16_t*>(ws.at(at_copy[t]));
    if (t == 0) continue;
    copy.valid_rows = reinterpret_cast<const int32_t*>(ws.at(at_kv_lens));
    if (p.paged) {
      copy.block_table = reinterpret_cast<const int32_t*>(ws.at(at_block_table));
      copy.table_stride = p.max_pages;
      copy.page_size = p.page_size;
    }
  }

  prefill::PrefillParams& d = impl->params;
  copy_tma_strides(kernel_inputs[0], d.q_stride);
  if (q_codes) {
    impl->q_strides_aligned = true;
    for (int i = 0; i < 3; ++i) {
      const int64_t bytes = args.q.stride[i] * bits_of(args.q.dtype) / 8;
      if (args.q.shape[i] > 1 && bytes % prefill::mx_group_align(args.q.dtype) != 0) {
        impl->q_strides_aligned = false;
      }
    }
    d.q_dtype = args.q.dtype;
    std::copy(args.q_scales.stride, args.q_scales.stride + 4, d.q_scale_stride);
  }
  copy_tma_strides(kernel_inputs[1], d.k_stride);
  copy_tma_strides(kernel_inputs[2], d.v_stride);
  d.o_dtype = args.o.dtype;
  copy_strides(args.o, d.o_stride);
  copy_strides(args.lse, d.lse_stride);
  if (user_partials) {
    copy_strides(args.split.partial_o, d.part_o_stride);
    copy_strides(args.split.partial_lse, d.part_lse_stride);
  } else if (internal_partials) {
    detail::set_internal_partials(p, ws.at(at_part_o), ws.at(at_part_lse), d);
    d.part_o_pairs = true;
  }
  d.work = reinterpret_cast<const prefill::WorkItem*>(ws.at(at_work));
  if (p.sparse) d.sparse_tiles = reinterpret_cast<const prefill::SparseTile*>(ws.at(at_steps));
  d.batch = p.batch;
  d.seq_q = p.seq_q;
  d.seq_k = p.seq_k;
  d.heads_q = p.heads_q;
  d.heads_kv = p.heads_kv;
  d.group = p.group;
  d.causal = args.causal != Causal::none;
  d.window = args.window;
  d.scale = p.scale;
  d.scale_log2 = float(double(p.scale) * 1.4426950408889634);

  impl->shifts_lse = args.k_mean.given() && args.lse.given();
  prefill::LseShiftParams& shift = impl->lse_shift;
  shift.q_dtype = q_codes ? args.q.dtype : element;
  std::copy(d.q_stride, d.q_stride + 3, shift.q_stride);
  std::copy(d.q_scale_stride, d.q_scale_stride + 4, shift.q_scale_stride);
  shift.k_mean = reinterpret_cast<const float*>(ws.at(at_k_mean));
  copy_strides(args.lse, shift.lse_stride);
  shift.batch = p.batch;
  shift.seq_q = p.seq_q;
  shift.heads_q = p.heads_q;
  shift.group = p.group;
  shift.dim_qk = p.dim_qk;
  shift.scale = p.scale;

  // The combine kernel reads the same tile table and partial layout.
  detail::CombineParams& c = impl->combine_params;
  c.o_dtype = args.o.dtype;
  copy_strides(args.o, c.o_stride);
  copy_strides(args.lse, c.lse_stride);
  std::copy(d.part_o_stride, d.part_o_stride + 5, c.part_o_stride);
  std::copy(d.part_lse_stride, d.part_lse_stride + 4, c.part_lse_stride);
  copy_strides(args.split.counts, c.counts_stride);
  c.tiles = reinterpret_cast<const prefill::TileInfo*>(ws.at(at_tiles));
  c.batch = p.batch;
  c.seq_q = p.seq_q;
  c.heads_q = p.heads_q;
  c.dim_v = p.dim_v;
  c.tile_m = split.tile_m;
  c.q_tiles = q_tiles;
  c.tile_heads = schedule.tile_heads;

  // An empty problem (no batch entry, query row or head) launches nothing.
  impl->work_items = partial_rows == 0 ? 0 : int64_t(work.size());
  detail::PlanAccess::set(plan, std::move(impl));
  return Status::ok();
}

Status run_prefill(const PrefillPlan& plan, const AttentionArgs& device_args, void* stream) {
  const PrefillPlan::Impl* impl = plan.impl();
  if (impl == nullptr) {
    return Status::invalid("plan: run_prefill needs a plan built by plan_prefill");
  }
  if (Status st = check_run_args(*impl, device_args); !st) return st;
  if (impl->work_items == 0) return Status::ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const TensorView* inputs[3] = {&device_args.q, &device_args.k, &device_args.v};
  const TensorView* scales[3] = {&device_args.q_scales, &device_args.k_scales,
                                 &device_args.v_scales};
  for (int t = 0; t < 3; ++t) {
    if (!impl->copied[t]) continue;
    prefill::DenseInputParams copy = impl->dense_inputs[t];
    copy.data = static_cast<const uint8_t*>(inputs[t]->data);
    copy.scales = static_cast<const uint8_t*>(scales[t]->data);
    if (cudaError_t e = prefill::launch_dense_input(copy, s); e != cudaSuccess) {
      return cuda_failure("dense input kernel launch", e);
    }
  }
  const prefill::PrefillParams params = params_for(*impl, device_args);
  const dim3 grid(unsigned(impl->work_items), unsigned(impl->grid_heads));
  if (cudaError_t e = impl->kernel.launch(params, grid, s); e != cudaSuccess) {
    return cuda_failure("prefill kernel launch", e);
  }
  if (impl->combines) {
    detail::CombineParams combine = combine_params_for(*impl, params, device_args);
    if (Status st = detail::launch_combine(combine, s); !st) return st;
  }
  if (impl->shifts_lse) {
    prefill::LseShiftParams shift = impl->lse_shift;
    shift.q = params.q;
    shift.q_scales = params.q_scales;
    shift.lse = params.lse;
    if (cudaError_t e = prefill::launch_lse_shift(shift, s); e != cudaSuccess) {
      return cuda_failure("LSE shift kernel launch", e);
    }
  }
  return Status::ok();
}

}  // namespace mxattn::cuda
