#include "cuda/prefill/kernels.h"

#include "cuda/common/head_dims.h"

namespace mxattn::cuda::prefill {
namespace {

// The head-dim pairs with instances: one per pair of the table (cuda/common/head_dims.h), for every
// kind of instance; `entry` is called as entry.template operator()<Dqk, Dv>().
template <class Entry>
KernelEntry entry_for_dims(int64_t dim_qk, int64_t dim_v, Entry entry) {
  return for_head_dims<KernelEntry>(dim_qk, dim_v, entry);
}

template <DType kElement>
KernelEntry element_entry(int64_t dim_qk, int64_t dim_v) {
  return entry_for_dims(dim_qk, dim_v, []<int kDimQK, int kDimV>() {
    return kernel_entry_of<kElement, kDimQK, kDimV>();
  });
}

}  // namespace

KernelEntry q_codes_kernel_entry(int64_t dim_qk, int64_t dim_v) {
  return entry_for_dims(dim_qk, dim_v,
                        []<int kDimQK, int kDimV>() { return q_codes_entry_of<kDimQK, kDimV>(); });
}

KernelEntry kernel_entry(DType element, int64_t dim_qk, int64_t dim_v) {
  switch (element) {
    case DType::bf16:
      return element_entry<DType::bf16>(dim_qk, dim_v);
    case DType::f16:
      return element_entry<DType::f16>(dim_qk, dim_v);
    default:
      return {};
  }
}

}  // namespace mxattn::cuda::prefill
