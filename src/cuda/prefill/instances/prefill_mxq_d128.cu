// Prefill kernel instance: MX Q dequantized on chip, bf16 K/V, Dqk 128, Dv 128.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry q_codes_entry_of<128, 128>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 128, 128, true>>();
}

}  // namespace mxattn::cuda::prefill
