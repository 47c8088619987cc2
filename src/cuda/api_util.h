// Host helpers shared by the CUDA engines' API layers (decode, prefill): CUDA errors as Status,
// alignment, the check that a run's device views match the planned ones, and the launch of the
// kernels that take one DecodeParams (the decode split kernel and the combine kernel both use).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/text.h"
#include "cuda/decode_params.h"
#include "cuda/kernels.h"
#include "mxattn/attention.h"

namespace mxattn::cuda::detail {

using core::cat;

inline Status cuda_failure(const char* what, cudaError_t e) {
  return Status::runtime(cat(what, ": ", cudaGetErrorString(e)));
}

// The current device into `device`, once it is known to offer `what` (a kernel's name, for the
// message) `smem_bytes` of shared memory per block; ErrorCode::unsupported when it does not.
inline Status current_device_with_smem(const char* what, int smem_bytes, int* device) {
  int smem_optin = 0;
  if (cudaError_t e = cudaGetDevice(device); e != cudaSuccess) return cuda_failure("device", e);
  if (cudaError_t e =
          cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, *device);
      e != cudaSuccess) {
    return cuda_failure("device attributes", e);
  }
  if (smem_bytes > smem_optin) {
    return Status::unsupported(cat("device: ", what, " needs ", smem_bytes,
                                   " bytes of shared memory per block; the device offers ",
                                   smem_optin));
  }
  return Status::ok();
}

inline bool aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// The first N element strides of a view (zeros for a view that is not given).
template <int N>
void copy_strides(const TensorView& v, int64_t (&out)[N]) {
  for (int i = 0; i < N; ++i) out[i] = v.stride[i];
}

inline bool same_layout(const TensorView& a, const TensorView& b) {
  if (a.given() != b.given()) return false;
  if (!a.given()) return true;
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i] || a.stride[i] != b.stride[i]) return false;
  return true;
}

// The device arguments of a run must be the planned ones (dtype, shape, strides) with device
// pointers: every tensor view is compared.
inline Status check_same_views(const AttentionArgs& planned, const AttentionArgs& given) {
  const AttentionArgs &a = planned, &d = given;
  const struct {
    const char* name;
    const TensorView& planned;
    const TensorView& given;
  } views[] = {{"q", a.q, d.q},
               {"k", a.k, d.k},
               {"v", a.v, d.v},
               {"o", a.o, d.o},
               {"lse", a.lse, d.lse},
               {"q_scales", a.q_scales, d.q_scales},
               {"k_scales", a.k_scales, d.k_scales},
               {"v_scales", a.v_scales, d.v_scales},
               {"partial_o", a.split.partial_o, d.split.partial_o},
               {"partial_lse", a.split.partial_lse, d.split.partial_lse},
               {"counts", a.split.counts, d.split.counts}};
  for (const auto& v : views) {
    if (!same_layout(v.planned, v.given)) {
      return Status::invalid(
          cat(v.name, ": the run's view differs from the planned one (dtype, shape or strides)"));
    }
  }
  return Status::ok();
}

// Launches a kernel taking one DecodeParams. `behind_split`: the kernel directly follows the split
// kernel on the stream and may start before that grid ends (programmatic dependent launch; the
// combine kernel waits for the grid itself).
inline Status launch(const KernelRef& kernel, dim3 grid, dim3 block, DecodeParams& params,
                     void* stream, bool behind_split = false, const char* what = "kernel launch") {
  void* args[] = {&params};
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = size_t(kernel.smem_bytes);
  config.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute early_start = {};
  early_start.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early_start.val.programmaticStreamSerializationAllowed = 1;
  if (behind_split) {
    config.attrs = &early_start;
    config.numAttrs = 1;
  }
  const cudaError_t e = cudaLaunchKernelExC(&config, kernel.function, args);
  if (e != cudaSuccess) return cuda_failure(what, e);
  return Status::ok();
}

// The combine kernel over every output row (batch x query row x query head) of `params`: one warp
// per row.
inline Status launch_combine(const KernelRef& combine, DecodeParams& params, void* stream,
                             bool behind_split = false) {
  const int64_t rows = params.batch * params.seq_q * params.heads_q;
  const dim3 grid(unsigned((rows + kCombineRowsPerBlock - 1) / kCombineRowsPerBlock));
  return launch(combine, grid, dim3(kCombineRowsPerBlock * 32), params, stream, behind_split,
                "combine kernel launch");
}

}  // namespace mxattn::cuda::detail
