// The AMX kernel set (built with the AVX-512 VBMI flags plus -mavx512bf16 -mamx-tile -mamx-bf16):
// the AVX-512 VBMI kernels plus the many-row and few-row kernels of the tile unit (amx_bf16.h,
// amx_rows.h).
#include "cpu/simd/amx_rows.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels kKernels = simd::make_amx_kernels<simd::HardwareTiles>(SimdIsa::avx512_amx);
}  // namespace

const FastKernels& fast_kernels_avx512_amx() {
  return kKernels;
}

}  // namespace mxattn::cpu
