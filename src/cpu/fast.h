// The fast CPU engine's entry with a chosen kernel set, for tests and benchmarks that compare the
// instruction sets; cpu::run_fast (engines.h) runs the best one this CPU supports.
#pragma once

#include <string_view>
#include <vector>

#include "core/problem.h"
#include "core/split_plan.h"
#include "cpu/fast_kernels.h"

namespace mxattn::cpu {

// The kernel sets this CPU can run, portable first, best last.
std::vector<SimdIsa> supported_isas();

// The kernel set cpu::run_fast runs: the one the environment variable MXATTN_CPU_ISA names, where
// it names one of supported_isas() (read once, at the first call), else the best of them.
SimdIsa chosen_isa();

// The kernel sets the tests check: supported_isas() and, where the CPU has AVX512-BF16,
// avx512_amx_emulated last (with or without the AMX unit: the emulation is what CPUs without it
// check the AMX kernels' arithmetic with, and where the unit is there the two are compared).
std::vector<SimdIsa> checked_isas();

std::string_view isa_name(SimdIsa isa);

// Which K and V rows the AMX set's few-row tile kernel (decode, RowTileStep) takes: bf16 only (what
// cpu::run_fast runs: FP8 rows on the tile unit were faster at 1-2 threads but slower at 4-16, and
// a result may not depend on the thread count), bf16 and FP8 (E4M3, E5M2), or none (the FMA
// kernels take every tile). The other choices are for tests that check every kernel.
enum class RowTiles : uint8_t { none, bf16, all };

// The kernel set of `isa`, which must be one of checked_isas().
const FastKernels& fast_kernels(SimdIsa isa);

// run_fast with the kernel set `isa`, which must be one of checked_isas(), and the few-row tile
// kernel taking `row_tiles`.
void run_fast_with(SimdIsa isa, const core::Problem& p, const core::SplitParams& split, int threads,
                   RowTiles row_tiles = RowTiles::bf16);

}  // namespace mxattn::cpu
