#include "api/engines.h"

#include "cuda/common/head_dims.h"

#if MXATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif
#if MXATTN_WITH_CUDA
#include "cuda/decode/engine.h"
#endif
#if MXATTN_WITH_PREFILL
#include "cuda/prefill/engine.h"
#endif

namespace mxattn::api {
namespace {

// The CPU engines (reference and fast share one partition, so their partials compare split by
// split): 64-row query tiles and 64-key tiles. split_kv = auto gives a split 32 key tiles (2048
// keys): a work item covers at most one split and the decode kernels fetch each tile's rows during
// the one before it, so an item's first tile is read without that; 32-tile splits instead of 8
// made the decode 20-25% faster (B1 Hq32 Hkv8 D128, 32k keys, Zen 4, 2 threads).
constexpr int64_t kCpuTileM = 64;
constexpr int64_t kCpuTileN = 64;
constexpr int64_t kCpuAutoTarget = 32;

// The CUDA decode engine: a query tile of up to 16 rows (every head of a KV group shares each K/V
// load) and 8 key tiles per auto split. Its key tile follows the logical key capacity Sk of the
// cache (paged: max_pages * page_size), never the batch or the other sequences' lengths, so that
// auto split_kv stays batch invariant: long caches take 128-key tiles (auto then gives each CTA at
// least 1024 keys, halving the per-CTA start and merge costs and the combine's bytes), caches
// below 2048 keys 32-key tiles (a short sequence still splits into enough CTAs to fill the GPU),
// 64 in between.
constexpr int64_t kDecodeTileM = 16;
constexpr int64_t kDecodeAutoTarget = 8;
constexpr int64_t decode_tile_n(int64_t seq_k) {
  return seq_k >= 4096 ? 128 : seq_k >= 2048 ? 64 : 32;
}

// The CUDA prefill engine: its kernel's fixed tiles for the head dims, and auto splits of 4096
// keys' worth of key tiles (32 tiles of 128 keys; 52 of the 80-key tiles of Dqk 256). Prefill has
// many query tiles to fill the GPU with, so it splits only long key runs.
constexpr int64_t kPrefillKeysPerSplit = 4096;

}  // namespace

std::string_view name_of(EngineKind kind) {
  switch (kind) {
    case EngineKind::cpu_reference:
      return "cpu-reference";
    case EngineKind::cpu_fast:
      return "cpu-fast";
    case EngineKind::cuda_decode:
      return "cuda-decode";
    case EngineKind::cuda_prefill:
      return "cuda-prefill";
  }
  return "unknown";
}

core::SplitParams split_params(const core::Problem& p, EngineKind kind) {
  switch (kind) {
    case EngineKind::cuda_decode:
      return core::resolve_split(p, kDecodeTileM, decode_tile_n(p.seq_k), kDecodeAutoTarget);
    case EngineKind::cuda_prefill: {
      // With a sparse layout the key tile is the layout's block (core::resolve_split).
      core::SplitParams s =
          core::resolve_split(p, cuda::kPrefillTileM, cuda::prefill_key_tile(int(p.dim_qk)));
      if (p.args.split.auto_target <= 0) {
        s.target_tiles_per_split = (kPrefillKeysPerSplit + s.tile_n - 1) / s.tile_n;
      }
      return s;
    }
    case EngineKind::cpu_reference:
    case EngineKind::cpu_fast:
      break;
  }
  return core::resolve_split(p, kCpuTileM, kCpuTileN, kCpuAutoTarget);
}

Status choose_engine([[maybe_unused]] const core::Problem& p, Engine requested, bool on_gpu,
                     EngineKind* kind) {
  switch (requested) {
    case Engine::cpu_reference:
      *kind = EngineKind::cpu_reference;
      return Status::ok();
    case Engine::cpu_fast:
      *kind = EngineKind::cpu_fast;
      return Status::ok();
    case Engine::automatic:
      if (!on_gpu) {
        *kind = EngineKind::cpu_fast;
        return Status::ok();
      }
      break;
    case Engine::cuda:
      break;
    default:
      return Status::invalid("engine: unknown engine");
  }
#if MXATTN_WITH_CUDA
  *kind = EngineKind::cuda_decode;
#if MXATTN_WITH_PREFILL
  const AttentionArgs& a = p.args;
  const bool prefers_prefill =
      p.seq_q > kDecodeTileM && !a.split.partial_o.given() && !a.split.counts.given();
  if (prefers_prefill && cuda::prefill::check_support(p)) *kind = EngineKind::cuda_prefill;
#endif
  return Status::ok();
#else
  return Status::unsupported("engine: this build of mxattn has no CUDA engine");
#endif
}

Status check_support([[maybe_unused]] const core::Problem& p, EngineKind kind) {
  switch (kind) {
#if MXATTN_WITH_CUDA
    case EngineKind::cuda_decode:
      return cuda::decode::check_support(p, split_params(p, kind));
#endif
#if MXATTN_WITH_PREFILL
    case EngineKind::cuda_prefill:
      return cuda::prefill::check_support(p);
#endif
    case EngineKind::cpu_reference:
    case EngineKind::cpu_fast:
      return Status::ok();
    default:
      return Status::unsupported("engine: this build of mxattn has no CUDA engine");
  }
}

bool is_device_pointer([[maybe_unused]] const void* p) {
#if MXATTN_WITH_CUDA
  cudaPointerAttributes attr{};
  if (p == nullptr || cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // a host pointer unknown to CUDA is not an error worth keeping
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
#else
  return false;
#endif
}

}  // namespace mxattn::api
