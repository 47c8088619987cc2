// Stores one element of the final output O in its storage type (the one place f32 results are
// rounded to f16 or bf16, with base/float16.h's round to nearest even).
#pragma once

#include <cstdint>

#include "base/float16.h"
#include "cuda/combine/combine.h"

namespace mxattn::cuda::detail {

__device__ __forceinline__ void store_output(const CombineParams& p, int64_t offset, float x) {
  switch (p.o_dtype) {
    case DType::f16:
      static_cast<uint16_t*>(p.o)[offset] = base::float_to_f16(x);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p.o)[offset] = base::float_to_bf16(x);
      break;
    default:
      static_cast<float*>(p.o)[offset] = x;
  }
}

}  // namespace mxattn::cuda::detail
