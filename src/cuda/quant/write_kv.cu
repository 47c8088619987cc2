// Cache writes on the GPU (spec §11), one launch for every token of a step: each thread writes one
// block of 32 head-dim positions of one token's K or V row (or, where K is rotated, which needs the
// whole row, one K row), through the host's row functions (mx/kv_rows.h), so the caches hold the
// bits the host writes. Slots past the caches are skipped and counted; nothing is allocated and
// nothing waits for the host, so a captured graph replays with new tokens and slots.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/quant/quant.h"
#include "mx/kv_rows.h"

namespace mxattn::cuda::quant {
namespace {

// The widest head dim a rotated key row may have: the row and its f64 scratch live in the thread.
constexpr int kMaxRotatedDim = 512;

struct Side {  // K or V
  const void* src = nullptr;
  DType src_type = DType::f32;
  int64_t src_stride[3] = {};  // [T, Hkv, D]
  void* cache = nullptr;
  DType cache_type = DType::bf16;
  int64_t cache_stride[4] = {};  // [pages, page_size, Hkv, D], stride 1 on D
  uint8_t* scales = nullptr;
  int64_t scale_stride[4] = {};
  int64_t dim = 0;
  int64_t blocks = 0;  // ceil(dim / 32)
};

struct Params {
  Side k, v;
  const void* slots = nullptr;
  bool slots_i64 = false;
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t page_size = 0;
  int64_t capacity = 0;  // pages * page_size
  ScaleMode mode = ScaleMode::floor;
  bool rotate_k = false;
  const float* k_mean = nullptr;  // [Hkv, Dqk]
  int64_t k_mean_stride[2] = {};
  int32_t* invalid_slots = nullptr;
  // Tasks: K's (a block each, or a row each where rotated), then V's blocks.
  int64_t k_tasks = 0;
  int64_t tasks = 0;
};

__device__ int64_t slot_of(const Params& p, int64_t t) {
  return p.slots_i64 ? static_cast<const int64_t*>(p.slots)[t]
                     : static_cast<const int32_t*>(p.slots)[t];
}

__device__ uint8_t* cache_row(const Side& s, int64_t page, int64_t offset, int64_t h) {
  return mx::element_address(
      s.cache, s.cache_type,
      page * s.cache_stride[0] + offset * s.cache_stride[1] + h * s.cache_stride[2]);
}

__device__ uint8_t* scale_row(const Side& s, int64_t page, int64_t offset, int64_t h) {
  return s.scales == nullptr ? nullptr
                             : s.scales + page * s.scale_stride[0] + offset * s.scale_stride[1] +
                                   h * s.scale_stride[2];
}

// Block b of token t's row of head h.
__device__ void write_block(const Params& p, const Side& s, const float* mean, int64_t mean_step,
                            int64_t t, int64_t h, int64_t b, int64_t page, int64_t offset) {
  const int64_t first = b * kMxBlock;
  const int count = int(min(int64_t(kMxBlock), s.dim - first));
  const int64_t src = t * s.src_stride[0] + h * s.src_stride[1] + first * s.src_stride[2];
  float x[kMxBlock];
  for (int i = 0; i < count; ++i) {
    x[i] = mx::load_plain(s.src, s.src_type, src + i * s.src_stride[2]);
    if (mean != nullptr) x[i] -= mean[(first + i) * mean_step];
  }
  mx::store_block(s.cache_type, cache_row(s, page, offset, h), scale_row(s, page, offset, h), b, x,
                  count, p.mode);
}

// Token t's whole K row of head h, rotated (and smoothed) first.
__device__ void write_rotated_row(const Params& p, const float* mean, int64_t t, int64_t h,
                                  int64_t page, int64_t offset) {
  const Side& s = p.k;
  float row[kMaxRotatedDim];
  double scratch[kMaxRotatedDim];
  const uint8_t* src =
      mx::element_address(s.src, s.src_type, t * s.src_stride[0] + h * s.src_stride[1]);
  mx::prepare_row(src, s.src_type, s.src_stride[2], s.dim, true, mean, p.k_mean_stride[1], row,
                  scratch);
  uint8_t* out = cache_row(s, page, offset, h);
  uint8_t* scales = scale_row(s, page, offset, h);
  for (int64_t b = 0; b < s.blocks; ++b) {
    const int count = int(min(int64_t(kMxBlock), s.dim - b * kMxBlock));
    mx::store_block(s.cache_type, out, scales, b, row + b * kMxBlock, count, p.mode);
  }
}

__global__ void write_kv_kernel(const __grid_constant__ Params p) {
  for (int64_t task = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; task < p.tasks;
       task += int64_t(gridDim.x) * blockDim.x) {
    const bool is_k = task < p.k_tasks;
    const Side& s = is_k ? p.k : p.v;
    const int64_t local = is_k ? task : task - p.k_tasks;
    const int64_t per_token_head = is_k && p.rotate_k ? 1 : s.blocks;
    const int64_t b = local % per_token_head;
    const int64_t h = (local / per_token_head) % p.heads;
    const int64_t t = local / (per_token_head * p.heads);
    const int64_t slot = slot_of(p, t);
    if (slot < 0) continue;
    if (slot >= p.capacity) {
      // Counted once per token: by its first K task.
      if (is_k && b == 0 && h == 0 && p.invalid_slots != nullptr) atomicAdd(p.invalid_slots, 1);
      continue;
    }
    const int64_t page = slot / p.page_size, offset = slot % p.page_size;
    const float* mean = is_k && p.k_mean != nullptr ? p.k_mean + h * p.k_mean_stride[0] : nullptr;
    if (is_k && p.rotate_k) {
      write_rotated_row(p, mean, t, h, page, offset);
    } else {
      write_block(p, s, mean, p.k_mean_stride[1], t, h, b, page, offset);
    }
  }
}

Side side_of(const TensorView& src, const TensorView& cache, const TensorView& scales) {
  Side s;
  s.src = src.data;
  s.src_type = src.dtype;
  std::copy(src.stride, src.stride + 3, s.src_stride);
  s.cache = cache.data;
  s.cache_type = cache.dtype;
  std::copy(cache.stride, cache.stride + 4, s.cache_stride);
  if (scales.given()) {
    s.scales = static_cast<uint8_t*>(scales.data);
    std::copy(scales.stride, scales.stride + 4, s.scale_stride);
  }
  s.dim = src.shape[2];
  s.blocks = (s.dim + kMxBlock - 1) / kMxBlock;
  return s;
}

constexpr int kThreads = 128;

}  // namespace

Status write_kv(const KvWriteArgs& a, void* stream) {
  Params p;
  p.k = side_of(a.k, a.k_cache, a.k_scales);
  p.v = side_of(a.v, a.v_cache, a.v_scales);
  p.slots = a.slot_mapping.data;
  p.slots_i64 = a.slot_mapping.dtype == DType::i64;
  p.tokens = a.k.shape[0];
  p.heads = a.k.shape[1];
  p.page_size = a.k_cache.shape[1];
  p.capacity = a.k_cache.shape[0] * p.page_size;
  p.mode = a.mode;
  p.rotate_k = a.rotate_k;
  if (a.rotate_k && p.k.dim > kMaxRotatedDim) {
    return Status::unsupported("rotate_k: the GPU rotates keys of at most 512 head-dim elements");
  }
  if (a.k_mean.given()) {
    p.k_mean = static_cast<const float*>(a.k_mean.data);
    p.k_mean_stride[0] = a.k_mean.stride[0];
    p.k_mean_stride[1] = a.k_mean.stride[1];
  }
  p.invalid_slots = static_cast<int32_t*>(a.invalid_slots.data);
  // Slot mappings are contiguous in the kernel's reading: a strided one is read through its stride.
  if (a.slot_mapping.given() && a.slot_mapping.shape[0] > 1 && a.slot_mapping.stride[0] != 1) {
    return Status::unsupported("slot_mapping: the GPU cache write reads a contiguous slot mapping");
  }
  p.k_tasks = p.tokens * p.heads * (a.rotate_k ? 1 : p.k.blocks);
  p.tasks = p.k_tasks + p.tokens * p.heads * p.v.blocks;
  if (p.tasks == 0) return Status::ok();
  const int64_t ctas = std::min<int64_t>((p.tasks + kThreads - 1) / kThreads, int64_t(1) << 20);
  detail::KernelRef ref{reinterpret_cast<const void*>(&write_kv_kernel), 0, false};
  return detail::launch(ref, dim3(unsigned(ctas)), dim3(kThreads), p, stream, false,
                        "write_kv kernel launch");
}

}  // namespace mxattn::cuda::quant
