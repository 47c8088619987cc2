// The AMX kernel set (built with the AVX-512 VBMI flags plus -mavx512bf16 -mamx-tile -mamx-bf16):
// the AVX-512 VBMI kernels plus the many-row kernels of the tile unit for bf16 Q, K and V. Not the
// few-row scores as bf16 dot products of the AVX-512 BF16 set: on the GPU machine's Sapphire
// Rapids host (two 512-bit FMA ports) they decoded MXFP8 caches 1.2-1.7x slower than the FMA
// scores (docs/perf.md, 2026-12-03 late); they pay on Zen 4, whose one 512-bit FMA a cycle the
// dot products double.
#include "cpu/simd/amx_bf16.h"
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_avx512.h"
#include "cpu/simd/rows_avx512_vbmi.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels make_avx512_amx_kernels() {
  FastKernels k = simd::make_kernels<simd::Avx512>(SimdIsa::avx512_amx);
  k.scores_from_rows = simd::scores_from_rows;
  k.softmax_by_rows = simd::softmax_by_rows;
  k.accumulate_from_rows = simd::accumulate_from_rows;
  k.pack_bf16_keys = simd::pack_bf16_keys;
  k.pack_bf16_values = simd::pack_bf16_values;
  k.attend_bf16 = simd::attend_bf16;
  return k;
}
constexpr FastKernels kKernels = make_avx512_amx_kernels();
}  // namespace

const FastKernels& fast_kernels_avx512_amx() {
  return kKernels;
}

}  // namespace mxattn::cpu
