// The AVX-512 VBMI kernel set (built with -mavx512f -mavx512bw -mavx512vl -mavx512vbmi -mfma
// -mf16c): the AVX-512 kernels plus the few-row kernels that read rows directly.
#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_avx512.h"
#include "cpu/simd/rows_avx512_vbmi.h"

namespace mxattn::cpu {

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels make_avx512_vbmi_kernels() {
  FastKernels k = simd::make_kernels<simd::Avx512>(SimdIsa::avx512_vbmi);
  k.scores_from_rows = simd::scores_from_rows;
  k.softmax_by_rows = simd::softmax_by_rows;
  k.accumulate_from_rows = simd::accumulate_from_rows;
  return k;
}
constexpr FastKernels kKernels = make_avx512_vbmi_kernels();
}  // namespace

const FastKernels& fast_kernels_avx512_vbmi() {
  return kKernels;
}

}  // namespace mxattn::cpu
