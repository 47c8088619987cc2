// Host-side handles of the decode engine's split kernels, so that its plan code (plain C++) can
// configure and launch them through the CUDA runtime without seeing device code.
#pragma once

#include <cstdint>

#include "cuda/common/launch.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::detail {

// Packed rows (query rows times the GQA group) a CTA of the narrow MX kernel holds.
inline constexpr int kNarrowRows = 8;

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

}  // namespace mxattn::cuda::detail
