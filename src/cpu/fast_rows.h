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
