// The normalized Walsh-Hadamard transform of one row (spec §5's optional rotation of Q and K), as
// one host/device function: the host's hadamard_rotate and the GPU's cache writes rotate a row to
// the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "mxattn/config.h"

namespace mxattn::mx {

// Rotates row[0, n) in place (n a power of two), in f64: in-place butterflies, after the pass of
// width h each 2h-block holds its Hadamard transform, then the scale 1/sqrt(n).
MXATTN_HD inline void hadamard_row(double* row, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const double a = row[j];
        const double b = row[j + h];
        row[j] = a + b;
        row[j + h] = a - b;
      }
    }
  }
  const double norm = 1.0 / sqrt(double(n));
  for (int64_t i = 0; i < n; ++i) row[i] *= norm;
}

}  // namespace mxattn::mx
