// The host half of one kernel instance: tensor maps from the parameters, the shared memory limit,
// the launch. Included by the instance translation units only.
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>

#include "cuda/prefill/kernels.h"
#include "cuda/prefill/prefill_kernel.cuh"

namespace mxattn::cuda::prefill {

template <class Traits>
cudaError_t prepare_kernel() {
  return cudaFuncSetAttribute(&prefill_kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              Traits::kSmemBytes);
}

template <class Traits>
cudaError_t launch_kernel(const PrefillParams& p, dim3 grid, cudaStream_t stream) {
  using Element = typename Traits::Element;
  const auto shape = [](int64_t a, int64_t b, int64_t c, int64_t d) {
    return make_shape(int(a), int(b), int(c), int(d));
  };
  const auto rows = [](const int64_t(&s)[3]) { return make_stride(s[1], _1{}, s[2], s[0]); };
  const auto transposed = [](const int64_t(&s)[3]) { return make_stride(_1{}, s[1], s[2], s[0]); };
  const auto k = make_tensor(make_gmem_ptr(static_cast<const Element*>(p.k)),
                             shape(p.seq_k, Traits::kDimQK, p.heads_kv, p.batch), rows(p.k_stride));
  const auto v =
      make_tensor(make_gmem_ptr(static_cast<const Element*>(p.v)),
                  shape(Traits::kDimV, p.seq_k, p.heads_kv, p.batch), transposed(p.v_stride));
  KernelArgs<Traits> args{};
  args.params = p;
  // MX Q (kQCodes) is read by the math warp groups, not the copy engine: no tensor map.
  if constexpr (!Traits::kQCodes) {
    const auto q =
        make_tensor(make_gmem_ptr(static_cast<const Element*>(p.q)),
                    shape(p.seq_q, Traits::kDimQK, p.heads_q, p.batch), rows(p.q_stride));
    args.tma_q = make_tma_copy(SM90_TMA_LOAD{}, q, typename Traits::SmemLayoutQ{});
  }
  // Without keys no CTA loads K or V, and a tensor map of zero rows does not exist.
  if (p.seq_k > 0) {
    args.tma_k = make_tma_copy(SM90_TMA_LOAD{}, k, take<0, 2>(typename Traits::SmemLayoutK{}));
    args.tma_v = make_tma_copy(SM90_TMA_LOAD{}, v, take<0, 2>(typename Traits::SmemLayoutVt{}));
  }
  void* kernel_args[] = {&args};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&prefill_kernel<Traits>), grid,
                          dim3(Traits::kThreads), kernel_args, size_t(Traits::kSmemBytes), stream);
}

template <class Traits>
KernelEntry entry_of() {
  KernelEntry e;
  e.prepare = &prepare_kernel<Traits>;
  e.launch = &launch_kernel<Traits>;
  e.tile_m = Traits::kBlockM;
  e.tile_n = Traits::kBlockN;
  e.smem_bytes = Traits::kSmemBytes;
  return e;
}

}  // namespace mxattn::cuda::prefill
