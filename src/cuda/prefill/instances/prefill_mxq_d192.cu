// Prefill kernel instance: MX Q dequantized on chip, bf16 K/V, Dqk 192, Dv 128.
#include "cuda/prefill/launch.cuh"

namespace mxattn::cuda::prefill {

template <>
KernelEntry q_codes_entry_of<192, 128>() {
  return entry_of<KernelTraits<cutlass::bfloat16_t, 192, 128, true>>();
}

}  // namespace mxattn::cuda::prefill
