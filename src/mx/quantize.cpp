// STUB: being written (MX helper).
#include "mxattn/mx.h"

namespace mxattn {
Status quantize(const TensorView&, const TensorView&, const TensorView&, int, ScaleMode) { return Status::unsupported("not written yet"); }
Status dequantize(const TensorView&, const TensorView&, int, const TensorView&) { return Status::unsupported("not written yet"); }
Status hadamard_rotate(const TensorView&) { return Status::unsupported("not written yet"); }
Status smooth_keys(const TensorView&, const TensorView&, const TensorView&) { return Status::unsupported("not written yet"); }
}  // namespace mxattn
