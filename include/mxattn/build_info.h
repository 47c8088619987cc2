// What this build of mxattn holds: its version, its engines, the CPU kernel sets and the CUDA
// architectures it was compiled for.
#pragma once

#include <string>
#include <vector>

namespace mxattn {

struct BuildInfo {
  std::string version;             // "MAJOR.MINOR.PATCH", as CMakeLists.txt's project()
  bool cuda = false;               // the CUDA engines (decode and combine)
  bool cuda_prefill = false;       // the CUDA prefill engine (built with CUTLASS headers)
  std::string cuda_architectures;  // CMAKE_CUDA_ARCHITECTURES, e.g. "90a"; empty without CUDA
  std::vector<std::string> cpu_kernel_sets;  // the fast CPU engine's sets this CPU can run
  std::string cpu_kernel_set;                // the set Engine::cpu_fast runs (MXATTN_CPU_ISA)
};

BuildInfo build_info();

}  // namespace mxattn
