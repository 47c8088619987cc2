// The public combine (mxattn::combine) on validated arguments: spec §3's merge of caller-given
// partials, without any LSE shift; and the merge of two attention states, which is the combine of
// two splits.
#include "base/index.h"
#include "cpu/engines.h"
#include "cpu/partials.h"

namespace mxattn::cpu {

void run_combine(const CombineArgs& args, int threads) {
  combine_partials(args, threads);
}

void run_merge(const MergeArgs& a, int threads) {
  const int64_t rows = a.o_a.shape[0], heads = a.o_a.shape[1], dim = a.o_a.shape[2];
  const float* lse_a = static_cast<const float*>(a.lse_a.data);
  const float* lse_b = static_cast<const float*>(a.lse_b.data);
#pragma omp parallel for num_threads(thread_count(threads)) schedule(static)
  for (int64_t r = 0; r < rows * heads; ++r) {
    const int64_t n = r / heads, h = r % heads;
    const float lse[2] = {lse_a[base::offset_of(a.lse_a, n, h)],
                          lse_b[base::offset_of(a.lse_b, n, h)]};
    float w[2];
    const core::MergeScale st = core::merge_weights(
        2, [&](int64_t s) { return lse[s]; }, w);
    const float divisor = core::merge_divisor(st.sum);
    for (int64_t d = 0; d < dim; ++d) {
      // The combine's order: 0 + w_0 O_0 + w_1 O_1, then the division (combine_partials).
      float acc = 0.0f;
      acc += w[0] * load_plain(a.o_a, base::offset_of(a.o_a, n, h, d));
      acc += w[1] * load_plain(a.o_b, base::offset_of(a.o_b, n, h, d));
      base::store_float(a.o, base::offset_of(a.o, n, h, d), acc / divisor);
    }
    if (a.lse.given()) {
      static_cast<float*>(a.lse.data)[base::offset_of(a.lse, n, h)] = core::merge_lse(st.m, st.sum);
    }
  }
}

}  // namespace mxattn::cpu
