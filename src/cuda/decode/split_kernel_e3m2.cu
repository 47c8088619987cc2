// Split-kernel instances for K/V stored as e3m2 (one translation unit per type keeps builds
// parallel).
#include "cuda/decode/narrow.cuh"

namespace mxattn::cuda::detail {

template <>
KernelRef split_kernel_of<DType::e3m2>(int64_t dim_qk, int64_t dim_v, bool narrow) {
  return decode_kernel_for_dims<DType::e3m2>(dim_qk, dim_v, narrow);
}

}  // namespace mxattn::cuda::detail
