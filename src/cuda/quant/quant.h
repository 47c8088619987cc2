// The GPU's MX producers: whole-tensor quantize and dequantize (spec §5) and cache writes
// (spec §11), launched on a stream with no allocation and no host synchronization. Arguments arrive
// checked (src/api); every block goes through mx/formats.h and mx/kv_rows.h, so the bits equal the
// host's.
#pragma once

#include "mxattn/kv_cache.h"
#include "mxattn/mx.h"

namespace mxattn::cuda::quant {

Status quantize(const TensorView& src, const TensorView& data, const TensorView& scales, int axis,
                ScaleMode mode, void* stream);
Status dequantize(const TensorView& data, const TensorView& scales, int axis, const TensorView& dst,
                  void* stream);
Status quantize_keys(const TensorView& k, const TensorView& data, const TensorView& scales,
                     ScaleMode mode, const KeyTransforms& transforms, void* stream);
Status write_kv(const KvWriteArgs& args, void* stream);

}  // namespace mxattn::cuda::quant
