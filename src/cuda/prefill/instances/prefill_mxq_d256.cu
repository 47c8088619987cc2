// Prefill kernel instance: MX Q dequantized on chip, bf16 K/V, Dqk 256, Dv 256.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry q_codes_entry_of<256, 256>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 256, 256, true>>();
}

}  // namespace mxattn::cuda::prefill
