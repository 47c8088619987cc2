// The AVX2 kernel set (built with -mavx2 -mfma -mf16c).
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_avx2.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels kKernels = simd::make_kernels<simd::Avx2>(SimdIsa::avx2);
}  // namespace

const FastKernels& fast_kernels_avx2() {
  return kKernels;
}

}  // namespace mxattn::cpu
