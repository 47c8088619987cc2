// The front door of cache writes (spec §11): validate, then write on the host or the GPU, by where
// the caches live.
#include "mxattn/kv_cache.h"
#include "api/placement.h"
#include "core/validate.h"
#include "cpu/engines.h"
#if MXATTN_WITH_CUDA
#include "cuda/quant/quant.h"
#endif

namespace mxattn {

Status write_kv(const KvWriteArgs& a, const RunOptions& options) {
  bool on_gpu = false;
  if (Status st = api::same_memory({{"k_cache", &a.k_cache},
                                    {"v_cache", &a.v_cache},
                                    {"k", &a.k},
                                    {"v", &a.v},
                                    {"k_scales", &a.k_scales},
                                    {"v_scales", &a.v_scales},
                                    {"slot_mapping", &a.slot_mapping},
                                    {"k_mean", &a.k_mean},
                                    {"invalid_slots", &a.invalid_slots}},
                                   &on_gpu);
      !st) {
    return st;
  }
  const bool cpu_asked =
      options.engine == Engine::cpu_fast || options.engine == Engine::cpu_reference;
  if (on_gpu && cpu_asked) {
    return Status::invalid(
        "engine: the CPU engines write host memory, but the caches are on a GPU");
  }
  if (!on_gpu && options.engine == Engine::cuda) {
    return Status::invalid(
        "engine: the CUDA engine writes device memory, but the caches are on "
        "the host");
  }
  if (Status st = core::validate_write_kv(a, !on_gpu); !st) return st;
  if (!on_gpu) {
    cpu::write_kv(a, options.threads);
    return Status::ok();
  }
#if MXATTN_WITH_CUDA
  return cuda::quant::write_kv(a, options.stream);
#else
  return Status::unsupported(
      "write_kv: the caches are in device memory, but this build of "
      "mxattn has no CUDA engine");
#endif
}

}  // namespace mxattn
