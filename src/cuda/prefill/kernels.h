// Host-side handles of the prefill kernel instances, so that the API layer (plain C++) can pick,
// prepare and launch one without seeing device code or CUTLASS.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/prefill/prefill_params.h"
#include "mxattn/dtype.h"

namespace mxattn::cuda::prefill {

struct KernelEntry {
  cudaError_t (*prepare)() = nullptr;  // raises the kernel's dynamic shared memory limit
  // Builds the tensor maps of Q, K and V from `params` and launches on `stream`.
  cudaError_t (*launch)(const PrefillParams& params, dim3 grid, cudaStream_t stream) = nullptr;
  int tile_m = 0;
  int tile_n = 0;
  int smem_bytes = 0;
  bool found() const { return launch != nullptr; }
};

// The instance for Q/K/V stored as `element` (bf16 or f16) with head dims (dim_qk, dim_v); not
// found when there is none.
KernelEntry kernel_entry(DType element, int64_t dim_qk, int64_t dim_v);

// The instance that reads Q as MX codes and dequantizes it on chip (KernelTraits::kQCodes; bf16
// K/V, MX K/V through their dense copies); not found when there is none.
KernelEntry q_codes_kernel_entry(int64_t dim_qk, int64_t dim_v);

// One instance per (element, Dqk, Dv), each in its own translation unit under instances/.
template <DType kElement, int kDimQK, int kDimV>
KernelEntry kernel_entry_of();
template <>
KernelEntry kernel_entry_of<DType::bf16, 64, 64>();
template <>
KernelEntry kernel_entry_of<DType::bf16, 128, 128>();
template <>
KernelEntry kernel_entry_of<DType::bf16, 256, 256>();
template <>
KernelEntry kernel_entry_of<DType::bf16, 192, 128>();
template <>
KernelEntry kernel_entry_of<DType::f16, 64, 64>();
template <>
KernelEntry kernel_entry_of<DType::f16, 128, 128>();
template <>
KernelEntry kernel_entry_of<DType::f16, 256, 256>();
template <>
KernelEntry kernel_entry_of<DType::f16, 192, 128>();

template <int kDimQK, int kDimV>
KernelEntry q_codes_entry_of();
template <>
KernelEntry q_codes_entry_of<64, 64>();
template <>
KernelEntry q_codes_entry_of<128, 128>();
template <>
KernelEntry q_codes_entry_of<256, 256>();
template <>
KernelEntry q_codes_entry_of<192, 128>();

}  // namespace mxattn::cuda::prefill
