// The split kernel of a K/V storage type: dispatch to the instances of its translation unit.
#include "cuda/decode/kernels.h"

namespace mxattn::cuda::detail {

KernelRef split_kernel(DType kv, int64_t dim_qk, int64_t dim_v, bool narrow) {
  switch (kv) {
    case DType::bf16:
      return split_kernel_of<DType::bf16>(dim_qk, dim_v, narrow);
    case DType::f16:
      return split_kernel_of<DType::f16>(dim_qk, dim_v, narrow);
    case DType::e4m3:
      return split_kernel_of<DType::e4m3>(dim_qk, dim_v, narrow);
    case DType::e5m2:
      return split_kernel_of<DType::e5m2>(dim_qk, dim_v, narrow);
    case DType::e2m3:
      return split_kernel_of<DType::e2m3>(dim_qk, dim_v, narrow);
    case DType::e3m2:
      return split_kernel_of<DType::e3m2>(dim_qk, dim_v, narrow);
    case DType::e2m1:
      return split_kernel_of<DType::e2m1>(dim_qk, dim_v, narrow);
    default:
      return {};
  }
}

}  // namespace mxattn::cuda::detail
