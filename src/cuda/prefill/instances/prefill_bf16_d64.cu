// Prefill kernel instance: bf16 Q/K/V, Dqk 64, Dv 64.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry kernel_entry_of<DType::bf16, 64, 64>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 64, 64>>();
}

}  // namespace mxattn::cuda::prefill
