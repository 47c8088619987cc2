// Prefill kernel instance: bf16 Q/K/V, Dqk 128, Dv 128.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry kernel_entry_of<DType::bf16, 128, 128>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 128, 128>>();
}

}  // namespace mxattn::cuda::prefill
