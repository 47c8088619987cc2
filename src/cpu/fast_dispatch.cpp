// Run-time choice of the fast engine's kernel set: the widest instruction set the CPU reports.
#include <algorithm>
#include <cstdlib>

#include "cpu/engines.h"
#include "cpu/fast.h"

#if defined(MXATTN_CPU_X86)
#include <cpuid.h>
#endif
#if defined(MXATTN_CPU_X86) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace mxattn::cpu {

#if defined(MXATTN_CPU_X86)
namespace {
// CPUID leaf 1, ECX bit 29 (not every compiler's __builtin_cpu_supports knows "f16c").
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

// AVX512-BF16: CPUID leaf 7 subleaf 1, EAX bit 5.
bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)) != 0;
}

// The tile unit with bf16 products (CPUID leaf 7: AMX-TILE and AMX-BF16 in EDX; the caller checks
// AVX512-BF16, for the weight conversions), its state enabled by the OS in XCR0 (XTILECFG and
// XTILEDATA), and, on Linux, this process's permission to use it: Linux 5.16 and later hand the
// 8 KiB of tile state only to processes that ask (arch_prctl ARCH_REQ_XCOMP_PERM), and fault any
// tile instruction before that.
bool cpu_has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
  if ((edx & kAmxBf16) == 0 || (edx & kAmxTile) == 0) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & bit_OSXSAVE) == 0) return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  if ((xcr0_low & kTileState) != kTileState) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
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
      if (__builtin_cpu_supports("avx512vbmi")) {
        isas.push_back(SimdIsa::avx512_vbmi);
        // GFNI: the AMX few-row kernel's FP8 decode (amx_rows.h), built into both AMX sets. Every
        // CPU with AVX512-BF16 and VBMI has it.
        if (cpu_has_avx512_bf16() && __builtin_cpu_supports("gfni")) {
          isas.push_back(SimdIsa::avx512_bf16);
          // Asked once: the permission is the process's, and the answer does not change.
          static const bool amx = cpu_has_amx_bf16();
          if (amx) isas.push_back(SimdIsa::avx512_amx);
        }
      }
    }
  }
#endif
  return isas;
}

std::vector<SimdIsa> checked_isas() {
  std::vector<SimdIsa> isas = supported_isas();
  if (std::find(isas.begin(), isas.end(), SimdIsa::avx512_bf16) != isas.end()) {
    isas.push_back(SimdIsa::avx512_amx_emulated);
  }
  return isas;
}

std::string_view isa_name(SimdIsa isa) {
  switch (isa) {
    case SimdIsa::avx512_amx_emulated:
      return "avx512_amx_emulated";
    case SimdIsa::avx512_amx:
      return "avx512_amx";
    case SimdIsa::avx512_vbmi:
      return "avx512_vbmi";
    case SimdIsa::avx512_bf16:
      return "avx512_bf16";
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
    case SimdIsa::avx512_amx:
      return fast_kernels_avx512_amx();
    case SimdIsa::avx512_amx_emulated:
      return fast_kernels_avx512_amx_emulated();
    case SimdIsa::avx512_vbmi:
      return fast_kernels_avx512_vbmi();
    case SimdIsa::avx512_bf16:
      return fast_kernels_avx512_bf16();
    case SimdIsa::avx512:
      return fast_kernels_avx512();
    case SimdIsa::avx2:
      return fast_kernels_avx2();
#endif
    default:
      return fast_kernels_portable();
  }
}

SimdIsa chosen_isa() {
  static const SimdIsa chosen = [] {
    const std::vector<SimdIsa> supported = supported_isas();
    if (const char* name = std::getenv("MXATTN_CPU_ISA"); name != nullptr && *name != 0) {
      for (SimdIsa isa : supported) {
        if (isa_name(isa) == name) return isa;
      }
    }
    return supported.back();
  }();
  return chosen;
}

void run_fast(const core::Problem& p, const core::SplitParams& split, int threads) {
  run_fast_with(chosen_isa(), p, split, threads);
}

}  // namespace mxattn::cpu
