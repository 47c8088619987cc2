// The SIMD kernels of the fast CPU engine, one set per instruction set, chosen at run time.
//
// The kernel translation units (src/cpu/simd/*.cpp) are compiled with their own ISA flags, so they
// include nothing with inline functions but system headers and this file (plain data and
// declarations only): an inline function compiled there with AVX-512 could be the copy the linker
// keeps for the baseline code.
#pragma once

#include <cstdint>

namespace mxattn::cpu {

enum class SimdIsa : uint8_t { portable, avx2, avx512 };

// How the elements of a K or V row are stored (FP6 and FP4 rows are decoded outside the kernels).
enum class RowElem : uint8_t {
  f32,
  f16,
  bf16,
  e4m3,
  e5m2,
};

// What the rows of one K or V tile share.
struct RowFormat {
  RowElem elem = RowElem::f32;
  int64_t width = 0;        // elements per row
  int64_t elem_stride = 1;  // plain types: elements between consecutive values (MX rows are packed)
  // MX: element d has the E8M0 scale scales[(d / scale_span) * scale_step] of its row: span 32 for
  // blocks along the row, 1 for V blocks along the keys (one scale per element).
  int64_t scale_span = 32;
  int64_t scale_step = 1;
  const float* scale_values = nullptr;  // 256 entries: E8M0 byte -> 2^(e - 127), NaN for 0xFF
};

// One row of a tile: its first element and, for MX, the scale byte of its first block.
struct RowSource {
  const uint8_t* data = nullptr;
  const uint8_t* scales = nullptr;
};

// The tile computation. Scores are in log2 units (Q is packed pre-multiplied by scale * log2(e)).
// `rows_padded` (the packed row count rounded up to 16) is the stride of the transposed score tile
// st[key * rows_padded + row]; `dim_padded` (rounded up to 16) the length of zero-padded rows.
struct FastKernels {
  SimdIsa isa = SimdIsa::portable;

  // dst[r * dst_stride + d] = value d of row r, for d < width; the padding is left as it is.
  void (*convert_rows)(const RowFormat& format, const RowSource* rows, int64_t count, float* dst,
                       int64_t dst_stride);

  // st[k * rows_padded + r] = dot(keys[k], q_t[:, r]) for every padded row, q_t [dim_padded x
  // rows_padded]: for tiles with many query rows (one vector lane per row).
  void (*scores_by_row_lanes)(const float* keys, int64_t key_stride, int64_t key_count,
                              const float* q_t, int64_t rows_padded, int64_t dim_padded, float* st);

  // st[k * rows_padded + r] = dot(keys[k], q[r]) for r < rows, q row-major with stride dim_padded:
  // for tiles with few query rows (decode), vectors along the head dim.
  void (*scores_by_dim_lanes)(const float* keys, int64_t key_stride, int64_t key_count,
                              const float* q, int64_t rows, int64_t dim_padded, float* st,
                              int64_t rows_padded);

  // Online softmax step over keys [0, key_count) of st for every padded row: masks key k of row r
  // out when k < first[r] or k > last[r] (tile-local; both null: no mask), updates the running
  // maximum `row_max` and sum `row_sum`, writes the rescale factor of the old state to `rescale`
  // and replaces the scores by their weights exp2(s - max).
  void (*softmax_step)(float* st, int64_t rows_padded, int64_t key_count, const float* first,
                       const float* last, float* row_max, float* row_sum, float* rescale);

  // out[r] = rescale[r] * out[r] + sum_k st[k * rows_padded + r] * values[k], r < rows, over
  // dim_padded columns.
  void (*accumulate_values)(const float* st, int64_t rows_padded, int64_t key_count,
                            const float* values, int64_t value_stride, int64_t dim_padded,
                            const float* rescale, int64_t rows, float* out, int64_t out_stride);
};

// The kernel sets; each is defined in its own translation unit.
const FastKernels& fast_kernels_portable();
const FastKernels& fast_kernels_avx2();
const FastKernels& fast_kernels_avx512();

}  // namespace mxattn::cpu
