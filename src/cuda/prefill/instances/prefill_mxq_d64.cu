// Prefill kernel instance: MX Q dequantized on chip, bf16 K/V, Dqk 64, Dv 64.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry q_codes_entry_of<64, 64>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 64, 64, true>>();
}

}  // namespace mxattn::cuda::prefill
