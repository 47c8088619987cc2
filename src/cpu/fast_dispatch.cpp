// Run-time choice of the fast engine's kernel set: the widest instruction set the CPU reports.
#include "cpu/engines.h"
#include "cpu/fast.h"

namespace mxattn::cpu {

std::vector<SimdIsa> supported_isas() {
  std::vector<SimdIsa> isas = {SimdIsa::portable};
#if defined(MXATTN_CPU_X86)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    isas.push_back(SimdIsa::avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
      isas.push_back(SimdIsa::avx512);
    }
  }
#endif
  return isas;
}

std::string_view isa_name(SimdIsa isa) {
  switch (isa) {
    case SimdIsa::avx512:
      return "avx512";
    case SimdIsa::avx2:
      return "avx2";
    default:
      return "portable";
  }
}

void run_fast(const core::Problem& p, const core::SplitParams& split, int threads) {
  static const SimdIsa best = supported_isas().back();
  run_fast_with(best, p, split, threads);
}

}  // namespace mxattn::cpu
