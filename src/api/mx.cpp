// The front door of whole-tensor MX quantization: check, then run on the host or the GPU, by
// where the tensors live.
#include "mxattn/mx.h"
#include "api/placement.h"
#include "mx/quantize.h"
#if MXATTN_WITH_CUDA
#include "cuda/quant/quant.h"
#endif

namespace mxattn {
#if !MXATTN_WITH_CUDA
namespace {

Status gpu_build_needed(const char* what) {
  return Status::unsupported(std::string(what) +
                             ": the tensors are in device memory, but this build of mxattn has no "
                             "CUDA engine");
}

}  // namespace
#endif

Status quantize(const TensorView& src, const TensorView& data, const TensorView& scales, int axis,
                ScaleMode mode, [[maybe_unused]] void* stream) {
  if (Status s = mx::check_mx_arguments("src", src, data, scales, axis); !s) return s;
  bool on_gpu = false;
  if (Status s = api::same_memory({{"src", &src}, {"data", &data}, {"scales", &scales}}, &on_gpu);
      !s) {
    return s;
  }
  if (!on_gpu) {
    mx::quantize_on_host(src, data, scales, axis, mode);
    return Status::ok();
  }
#if MXATTN_WITH_CUDA
  return cuda::quant::quantize(src, data, scales, axis, mode, stream);
#else
  return gpu_build_needed("quantize");
#endif
}

Status dequantize(const TensorView& data, const TensorView& scales, int axis, const TensorView& dst,
                  [[maybe_unused]] void* stream) {
  if (Status s = mx::check_mx_arguments("dst", dst, data, scales, axis); !s) return s;
  bool on_gpu = false;
  if (Status s = api::same_memory({{"data", &data}, {"scales", &scales}, {"dst", &dst}}, &on_gpu);
      !s) {
    return s;
  }
  if (!on_gpu) {
    mx::dequantize_on_host(data, scales, axis, dst);
    return Status::ok();
  }
#if MXATTN_WITH_CUDA
  return cuda::quant::dequantize(data, scales, axis, dst, stream);
#else
  return gpu_build_needed("dequantize");
#endif
}

Status quantize_keys(const TensorView& k, const TensorView& data, const TensorView& scales,
                     ScaleMode mode, const KeyTransforms& t, [[maybe_unused]] void* stream) {
  bool on_gpu = false;
  if (Status s = api::same_memory({{"k", &k},
                                   {"data", &data},
                                   {"scales", &scales},
                                   {"k_mean", &t.k_mean},
                                   {"kv_len", &t.kv_len}},
                                  &on_gpu);
      !s) {
    return s;
  }
  if (Status s = mx::check_key_transforms(k, data, scales, t, !on_gpu); !s) return s;
  if (!on_gpu) {
    mx::quantize_keys_on_host(k, data, scales, mode, t);
    return Status::ok();
  }
#if MXATTN_WITH_CUDA
  return cuda::quant::quantize_keys(k, data, scales, mode, t, stream);
#else
  return gpu_build_needed("quantize_keys");
#endif
}

}  // namespace mxattn
