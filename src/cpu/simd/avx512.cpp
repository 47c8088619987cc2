// The AVX-512 kernel set (built with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c).
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_avx512.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels kKernels = simd::make_kernels<simd::Avx512>(SimdIsa::avx512);
}  // namespace

const FastKernels& fast_kernels_avx512() {
  return kKernels;
}

}  // namespace mxattn::cpu
