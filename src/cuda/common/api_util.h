// Host helpers shared by the CUDA engines' plan code (decode, prefill): alignment, the plan's
// device workspace (layout, allocation, uploads) and what goes into it (the block table, the
// internal partials' strides), and the check that a run's device views match the planned ones.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "base/text.h"
#include "core/problem.h"
#include "cuda/common/launch.h"
#include "mxattn/attention.h"

namespace mxattn::cuda::detail {

using base::cat;

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

// Bump allocation inside a plan's workspace, 256-byte aligned.
struct WorkspaceLayout {
  int64_t bytes = 0;
  int64_t take(int64_t n) {
    const int64_t at = bytes;
    bytes += (n + 255) / 256 * 256;
    return at;
  }
};

// A plan's one device allocation: its tables, partials and copies, freed with the plan.
class DeviceWorkspace {
 public:
  DeviceWorkspace() = default;
  DeviceWorkspace(const DeviceWorkspace&) = delete;
  DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
  ~DeviceWorkspace() {
    if (data_ != nullptr) cudaFree(data_);
  }

  // `bytes` (at least 256, so that an empty layout still has a base) on the current device.
  Status allocate(int64_t bytes) {
    void* data = nullptr;
    if (cudaError_t e = cudaMalloc(&data, size_t(bytes < 256 ? 256 : bytes)); e != cudaSuccess) {
      if (e == cudaErrorMemoryAllocation) {
        return Status::runtime(cat("workspace: out of device memory for ", bytes, " bytes"));
      }
      return cuda_failure("workspace", e);
    }
    data_ = static_cast<uint8_t*>(data);
    return Status::ok();
  }

  uint8_t* at(int64_t offset) const { return data_ + offset; }

  // Host values into the workspace at `offset` (nothing for an empty vector).
  template <class T>
  Status upload(int64_t offset, const std::vector<T>& values) const {
    if (values.empty()) return Status::ok();
    if (cudaError_t e = cudaMemcpy(data_ + offset, values.data(), values.size() * sizeof(T),
                                   cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      return cuda_failure("workspace upload", e);
    }
    return Status::ok();
  }

  Status zero(int64_t offset, int64_t bytes) const {
    if (bytes == 0) return Status::ok();
    if (cudaError_t e = cudaMemset(data_ + offset, 0, size_t(bytes)); e != cudaSuccess) {
      return cuda_failure("workspace upload", e);
    }
    return Status::ok();
  }

 private:
  uint8_t* data_ = nullptr;
};

// A paged cache's block table [B, max_pages], read on the host as contiguous int32 (empty for a
// dense cache).
inline std::vector<int32_t> read_block_table(const core::Problem& p, const TensorView& table) {
  std::vector<int32_t> out;
  if (!p.paged) return out;
  out.reserve(size_t(p.batch * p.max_pages));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t page = 0; page < p.max_pages; ++page)
      out.push_back(base::read_i32(table, base::offset_of(table, b, page)));
  return out;
}

// The bytes of the internal partials, contiguous O_s [S, B, Sq, Hq, Dv] and L_s [S, B, Hq, Sq] in
// f32, for `slots` splits.
inline int64_t partial_o_bytes(const core::Problem& p, int64_t slots) {
  return slots * p.batch * p.seq_q * p.heads_q * p.dim_v * 4;
}
inline int64_t partial_lse_bytes(const core::Problem& p, int64_t slots) {
  return slots * p.batch * p.seq_q * p.heads_q * 4;
}

// An engine's parameters (CombineParams, DecodeParams or PrefillParams) pointed at internal
// partials laid out as partial_o_bytes and partial_lse_bytes describe.
template <class Params>
void set_internal_partials(const core::Problem& p, uint8_t* part_o, uint8_t* part_lse, Params& d) {
  d.part_o = reinterpret_cast<float*>(part_o);
  d.part_lse = reinterpret_cast<float*>(part_lse);
  const int64_t o_strides[5] = {p.batch * p.seq_q * p.heads_q * p.dim_v,
                                p.seq_q * p.heads_q * p.dim_v, p.heads_q * p.dim_v, p.dim_v, 1};
  const int64_t lse_strides[4] = {p.batch * p.heads_q * p.seq_q, p.heads_q * p.seq_q, p.seq_q, 1};
  for (int i = 0; i < 5; ++i) d.part_o_stride[i] = o_strides[i];
  for (int i = 0; i < 4; ++i) d.part_lse_stride[i] = lse_strides[i];
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

}  // namespace mxattn::cuda::detail
