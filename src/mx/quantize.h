// The host side of whole-tensor MX quantization (spec §5): its argument checks, shared with the
// GPU path, and the host loops. mxattn::quantize and dequantize (src/api) check, then run these or
// the GPU kernels.
#pragma once

#include "mxattn/mx.h"

namespace mxattn::mx {

// Everything quantize and dequantize check: `logical` is src (quantize) or dst (dequantize), named
// `logical_name` in messages.
Status check_mx_arguments(const char* logical_name, const TensorView& logical,
                          const TensorView& data, const TensorView& scales, int axis);

// On checked arguments in host memory.
void quantize_on_host(const TensorView& src, const TensorView& data, const TensorView& scales,
                      int axis, ScaleMode mode);
void dequantize_on_host(const TensorView& data, const TensorView& scales, int axis,
                        const TensorView& dst);

// quantize_keys' checks (on top of quantize's), the kv_len values where `lengths_readable`.
Status check_key_transforms(const TensorView& k, const TensorView& data, const TensorView& scales,
                            const KeyTransforms& t, bool lengths_readable);

// quantize_keys on checked arguments in host memory.
void quantize_keys_on_host(const TensorView& k, const TensorView& data, const TensorView& scales,
                           ScaleMode mode, const KeyTransforms& t);

}  // namespace mxattn::mx
