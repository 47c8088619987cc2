// The AVX-512 BF16 kernel set (built with the AVX-512 VBMI flags plus -mavx512bf16): the AVX-512
// VBMI kernels plus the few-row scores as bf16 dot products. Also the AMX set with its tile unit
// emulated (for the tests on CPUs without AMX), which needs no more than these flags.
#include "cpu/simd/amx_rows.h"
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_avx512.h"
#include "cpu/simd/rows_avx512_bf16.h"
#include "cpu/simd/rows_avx512_vbmi.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels make_avx512_bf16_kernels() {
  FastKernels k = simd::make_kernels<simd::Avx512>(SimdIsa::avx512_bf16);
  k.scores_from_rows = simd::scores_from_rows;
  k.scores_bf16_from_rows = simd::scores_bf16_from_rows;
  k.softmax_by_rows = simd::softmax_by_rows;
  k.accumulate_from_rows = simd::accumulate_from_rows;
  return k;
}
constexpr FastKernels kKernels = make_avx512_bf16_kernels();
constexpr FastKernels kEmulatedAmx =
    simd::make_amx_kernels<simd::EmulatedTiles>(SimdIsa::avx512_amx_emulated);
}  // namespace

const FastKernels& fast_kernels_avx512_bf16() {
  return kKernels;
}

const FastKernels& fast_kernels_avx512_amx_emulated() {
  return kEmulatedAmx;
}

}  // namespace mxattn::cpu
