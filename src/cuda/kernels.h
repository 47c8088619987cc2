// Host-side handles of the decode engine's kernels, so that the API layer (plain C++) can configure
// and launch them through the CUDA runtime without seeing device code.
#pragma once

#include <cstdint>

#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

// Packed rows (query rows times the GQA group) a CTA of the narrow MX kernel holds.
inline constexpr int kNarrowRows = 8;

// A kernel taking one `const DecodeParams` argument, and the dynamic shared memory it needs.
struct KernelRef {
  const void* function = nullptr;
  int smem_bytes = 0;
  bool chains = false;  // split kernels: a CTA may compute several splits (WorkItem::chain)
};

// The split kernel for K/V stored as `kv` with head dims (dim_qk, dim_v); no function when that
// combination has no instance. `narrow`: the transposed kernel for CTAs of at most kNarrowRows
// packed rows (decode_narrow.cuh) where the type has one, else the general kernel.
KernelRef split_kernel(DType kv, int64_t dim_qk, int64_t dim_v, bool narrow);

// One instance per storage type, each in its own translation unit.
template <DType KV>
KernelRef split_kernel_of(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::bf16>(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::f16>(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::e4m3>(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::e5m2>(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::e2m3>(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::e3m2>(int64_t dim_qk, int64_t dim_v, bool narrow);
template <>
KernelRef split_kernel_of<DType::e2m1>(int64_t dim_qk, int64_t dim_v, bool narrow);

// The combine kernel: one warp per output row, kCombineRowsPerBlock rows per CTA.
inline constexpr int kCombineRowsPerBlock = 4;
KernelRef combine_kernel();

}  // namespace mxattn::cuda::detail
