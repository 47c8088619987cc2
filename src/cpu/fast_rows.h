// The decode tables a RowFormat points to, built from the shared codecs (src/mx/formats.h): the
// fast engine's row gather and the kernel tests use the same ones.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/fast_kernels.h"
#include "mxattn/dtype.h"

namespace mxattn::cpu {

// The RowElem of K or V rows stored as `t`.
RowElem row_elem(DType t);

// Where element d of a query row goes in the bf16 rows of FastKernels::scores_bf16_from_rows,
// for keys of `elem`: the element itself for bf16 keys; for FP8 keys, within each 128 elements
// (four MX blocks), element 32 q + 8 t + i at 32 t + 8 q + i, so that every 32-bit lane of the
// kernel's vectors holds elements of one block.
int64_t bf16_dot_position(RowElem elem, int64_t d);

class RowTables {
 public:
  explicit RowTables(DType t);

  // A format of rows stored as the table's type, pointing to its tables (valid while they live).
  RowFormat format(int64_t width, int64_t elem_stride, int64_t scale_span,
                   int64_t scale_step) const;

 private:
  RowElem elem_;
  std::vector<float> scale_values_;       // E8M0 byte -> 2^(e - 127), NaN for 0xFF
  std::vector<float> code_values_;        // FP6 and FP4
  std::vector<uint8_t> code_bf16_bytes_;  // FP8
};

}  // namespace mxattn::cpu
