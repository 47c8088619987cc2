// Split-kernel instances for K/V stored as e2m1 (one translation unit per type keeps builds
// parallel).
#include "cuda/decode/narrow.cuh"

namespace mxattn::cuda::detail {

template <>
KernelRef split_kernel_of<DType::e2m1>(int64_t dim_qk, int64_t dim_v, bool narrow) {
  return decode_kernel_for_dims<DType::e2m1>(dim_qk, dim_v, narrow);
}

}  // namespace mxattn::cuda::detail
