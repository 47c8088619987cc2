// The portable kernel set, built for the baseline target.
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_portable.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels kKernels = simd::make_kernels<simd::Portable>(SimdIsa::portable);
}  // namespace

const FastKernels& fast_kernels_portable() {
  return kKernels;
}

}  // namespace mxattn::cpu
