// Which engine runs a call and the split partition it runs with: the one home of both choices,
// used by mxattn::attention, the CUDA plans, the command line, the Python package, the benchmarks
// and the tests (which size partial buffers and reproduce an engine's partition with it).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/plan.h"
#include "core/problem.h"
#include "mxattn/attention.h"
#include "mxattn/status.h"

namespace mxattn::api {

// The engines, with the CUDA path's two kernels families told apart: each has its own tiles.
enum class EngineKind : uint8_t { cpu_reference, cpu_fast, cuda_decode, cuda_prefill };

// "cpu-reference", "cpu-fast", "cuda-decode", "cuda-prefill".
std::string_view name_of(EngineKind kind);

constexpr bool is_cuda(EngineKind kind) {
  return kind == EngineKind::cuda_decode || kind == EngineKind::cuda_prefill;
}
constexpr bool is_cpu(EngineKind kind) {
  return !is_cuda(kind);
}

// The split parameters `kind` runs `p` with: the engine's default tiles and auto target (key tiles
// per split) under the caller's SplitOptions.
core::SplitParams split_params(const core::Problem& p, EngineKind kind);

// The engine that runs `p` when the caller asks for `requested`: Engine::automatic is the CUDA
// path when `on_gpu` (the tensors are in device memory) and the fast CPU engine otherwise. The
// CUDA path takes the prefill engine for more query rows than one decode tile holds, unless the
// caller sized partial buffers or counts (those follow the decode engine's tiles) or the prefill
// engine does not support the problem (then the decode engine runs it). Fails with
// ErrorCode::unsupported when the CUDA path is asked for in a build without it.
Status choose_engine(const core::Problem& p, Engine requested, bool on_gpu, EngineKind* kind);

// What engine `kind` supports beyond spec validity (the CPU engines run every valid problem; the
// CUDA engines name what they lack with ErrorCode::unsupported).
Status check_support(const core::Problem& p, EngineKind kind);

// True when `p` points to device memory (always false in a build without CUDA).
bool is_device_pointer(const void* p);

}  // namespace mxattn::api
