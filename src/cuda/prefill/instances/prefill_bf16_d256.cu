// Prefill kernel instance: bf16 Q/K/V, Dqk 256, Dv 256.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry kernel_entry_of<DType::bf16, 256, 256>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 256, 256>>();
}

}  // namespace mxattn::cuda::prefill
