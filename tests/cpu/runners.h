// The ways the CPU tests run a problem: the reference engine, and the fast engine with each kernel
// set the tests check on this CPU (cpu::checked_isas(): the sets it supports, and the AMX set
// emulated where it has no AMX), so that every property is checked on every set.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "cpu/fast.h"
#include "cpu/test_problem.h"

namespace mxattn::cpu {

// Kernel-set parameters print by name in test output.
inline void PrintTo(SimdIsa isa, std::ostream* os) {
  *os << isa_name(isa);
}

}  // namespace mxattn::cpu

namespace mxattn::test {

struct CpuRunner {
  bool reference = true;
  cpu::SimdIsa isa = cpu::SimdIsa::portable;  // the fast engine's kernel set

  Status run(TestProblem& p, int threads = 0, cpu::RowTiles row_tiles = cpu::RowTiles::bf16) const {
    return reference ? p.run(Engine::cpu_reference, threads)
                     : p.run_fast_with(isa, threads, row_tiles);
  }
  std::string name() const {
    return reference ? "reference" : "fast_" + std::string(cpu::isa_name(isa));
  }
};

inline void PrintTo(const CpuRunner& runner, std::ostream* os) {
  *os << runner.name();
}

// The fast engine with every kernel set checked on this CPU, portable first.
inline std::vector<CpuRunner> fast_runners() {
  std::vector<CpuRunner> runners;
  for (cpu::SimdIsa isa : cpu::checked_isas()) runners.push_back({false, isa});
  return runners;
}

// The reference engine, then fast_runners().
inline std::vector<CpuRunner> cpu_runners() {
  std::vector<CpuRunner> runners = {CpuRunner{}};
  for (const CpuRunner& fast : fast_runners()) runners.push_back(fast);
  return runners;
}

// Test-name suffix of a runner parameter.
inline std::string runner_name(const ::testing::TestParamInfo<CpuRunner>& param) {
  return param.param.name();
}

}  // namespace mxattn::test
