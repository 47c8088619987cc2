// The portable kernel set, built for the baseline target, and the FP6/FP4 row decoding every set
// shares.
#include <algorithm>

#include "cpu/simd/kernels.h"
#include "cpu/simd/ops_portable.h"
#include "mx/formats.h"

namespace mxattn::cpu {

void convert_packed_rows(const RowFormat& f, const RowSource* rows, int64_t count, float* dst,
                         int64_t dst_stride) {
  // load_code depends only on the code width, so one type of each width stands for both.
  const DType packing = f.elem == RowElem::fp6 ? DType::e2m3 : DType::e2m1;
  for (int64_t r = 0; r < count; ++r, dst += dst_stride) {
    const RowSource& row = rows[r];
    for (int64_t block = 0; block * f.scale_span < f.width; ++block) {
      const float scale = f.scale_values[row.scales[block * f.scale_step]];
      const int64_t end = std::min(f.width, (block + 1) * f.scale_span);
      for (int64_t d = block * f.scale_span; d < end; ++d) {
        dst[d] = f.code_values[mx::load_code(packing, row.data, d)] * scale;
      }
    }
  }
}

namespace {
// Built at compile time: no code of this unit runs before the ISA check.
constexpr FastKernels kKernels = simd::make_kernels<simd::Portable>(SimdIsa::portable);
}  // namespace

const FastKernels& fast_kernels_portable() {
  return kKernels;
}

}  // namespace mxattn::cpu
