#include "cuda/prefill/kernels.h"

namespace mxattn::cuda::prefill {
namespace {

template <DType kElement>
KernelEntry entry_for_dims(int64_t dim_qk, int64_t dim_v) {
  if (dim_qk == 64 && dim_v == 64) return kernel_entry_of<kElement, 64, 64>();
  if (dim_qk == 128 && dim_v == 128) return kernel_entry_of<kElement, 128, 128>();
  if (dim_qk == 256 && dim_v == 256) return kernel_entry_of<kElement, 256, 256>();
  if (dim_qk == 192 && dim_v == 128) return kernel_entry_of<kElement, 192, 128>();
  return {};
}

}  // namespace

KernelEntry q_codes_kernel_entry(int64_t dim_qk, int64_t dim_v) {
  if (dim_qk == 64 && dim_v == 64) return q_codes_entry_of<64, 64>();
  if (dim_qk == 128 && dim_v == 128) return q_codes_entry_of<128, 128>();
  if (dim_qk == 256 && dim_v == 256) return q_codes_entry_of<256, 256>();
  if (dim_qk == 192 && dim_v == 128) return q_codes_entry_of<192, 128>();
  return {};
}

KernelEntry kernel_entry(DType element, int64_t dim_qk, int64_t dim_v) {
  switch (element) {
    case DType::bf16:
      return entry_for_dims<DType::bf16>(dim_qk, dim_v);
    case DType::f16:
      return entry_for_dims<DType::f16>(dim_qk, dim_v);
    default:
      return {};
  }
}

}  // namespace mxattn::cuda::prefill
