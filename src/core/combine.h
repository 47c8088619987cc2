// spec §3: the NaN-safe f32 merge of split partials (O_s, L_s). One definition for the CPU combine
// and the CUDA combine kernel.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "mxattn/config.h"

namespace mxattn::core {

// Running state of a merge over splits: the reference maximum m and the weight sum.
struct MergeScale {
  float m = -FLT_MAX;  // lowest finite f32: exp(-inf - m) is 0, never NaN
  float sum = 0.0f;
};

// m = max(max_s L_s, lowest finite f32). NaN L_s are passed over here and surface through w_s.
MXATTN_HD inline float merge_max(float m, float lse) {
  return lse > m ? lse : m;
}

// w_s = exp(L_s - m).
MXATTN_HD inline float merge_weight(float lse, float m) {
  return expf(lse - m);
}

// O = sum_s w_s O_s / max(sum_s w_s, 1): the divisor only guards the all-empty case (sum = 0).
MXATTN_HD inline float merge_divisor(float sum) {
  return sum < 1.0f ? 1.0f : sum;
}

// LSE = m + ln(sum_s w_s), -inf when every split was empty.
MXATTN_HD inline float merge_lse(float m, float sum) {
  return sum == 0.0f ? -INFINITY : m + logf(sum);
}

// Merges `count` splits of one row. lse(s) gives L_s; the weights are written to w[0..count).
template <class LseAt>
MXATTN_HD inline MergeScale merge_weights(int64_t count, LseAt lse, float* w) {
  MergeScale st;
  for (int64_t s = 0; s < count; ++s) st.m = merge_max(st.m, lse(s));
  for (int64_t s = 0; s < count; ++s) {
    w[s] = merge_weight(lse(s), st.m);
    st.sum += w[s];
  }
  return st;
}

}  // namespace mxattn::core
