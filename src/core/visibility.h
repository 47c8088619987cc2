// spec §2: which keys a query row sees. The one definition used by every engine, the plan and the
// CLI.
#pragma once

#include <cstdint>

#include "mxattn/config.h"

namespace mxattn::core {

MXATTN_HD constexpr int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
MXATTN_HD constexpr int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}
MXATTN_HD constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The visibility rule of one batch entry: row i sees keys [lo(i), hi(i)] (empty when hi < lo).
// Both bounds are non-decreasing in i, so a tile of rows [i0, i1] sees at most [lo(i0), hi(i1)].
struct Visibility {
  int64_t last = -1;  // kv_len[b] - 1
  bool causal = false;
  int64_t offset = 0;   // off_b of the causal alignment
  int64_t window = -1;  // sliding window W; negative: none

  MXATTN_HD constexpr int64_t hi(int64_t i) const {
    return causal ? min64(last, i + offset) : last;
  }
  // The window trails the causal diagonal i + offset even where that lies past `last` (spec §2.3).
  MXATTN_HD constexpr int64_t lo(int64_t i) const {
    return window < 0 ? 0 : max64(0, (causal ? i + offset : last) - window);
  }
  MXATTN_HD constexpr bool visible(int64_t i, int64_t j) const { return j >= lo(i) && j <= hi(i); }
  MXATTN_HD constexpr bool row_empty(int64_t i) const { return hi(i) < lo(i); }
};

}  // namespace mxattn::core
