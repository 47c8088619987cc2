// Run-time choice of the fast engine's kernel set: the widest instruction set the CPU reports.
#include "cpu/engines.h"
#include "cpu/fast.h"

#if defined(MXATTN_CPU_X86)
#include <cpuid.h>
#endif

namespace mxattn::cpu {

#if defined(MXATTN_CPU_X86)
namespace {
// CPUID leaf 1, ECX bit 29 (not every compiler's __builtin_cpu_supports knows "f16c").
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
}  // namespace
#endif

std::vector<SimdIsa> supported_isas() {
  std::vector<SimdIsa> isas = {SimdIsa::portable};
#if defined(MXATTN_CPU_X86)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c()) {
    isas.push_back(SimdIsa::avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
      isas.push_back(SimdIsa::avx512);
      if (__builtin_cpu_supports("avx512vbmi")) isas.push_back(SimdIsa::avx512_vbmi);
    }
  }
#endif
  return isas;
}

std::string_view isa_name(SimdIsa isa) {
  switch (isa) {
    case SimdIsa::avx512_vbmi:
      return "avx512_vbmi";
    case SimdIsa::avx512:
      return "avx512";
    case SimdIsa::avx2:
      return "avx2";
    default:
      return "portable";
  }
}

const FastKernels& fast_kernels(SimdIsa isa) {
  switch (isa) {
#if defined(MXATTN_CPU_X86)
    case SimdIsa::avx512_vbmi:
      return fast_kernels_avx512_vbmi();
    case SimdIsa::avx512:
      return fast_kernels_avx512();
    case SimdIsa::avx2:
      return fast_kernels_avx2();
#endif
    default:
      return fast_kernels_portable();
  }
}

void run_fast(const core::Problem& p, const core::SplitParams& split, int threads) {
  static const SimdIsa best = supported_isas().back();
  run_fast_with(best, p, split, threads);
}

}  // namespace mxattn::cpu
