// The public combine (mxattn::combine) on validated arguments: spec §3's merge of caller-given
// partials, without any LSE shift.
#include "cpu/engines.h"
#include "cpu/partials.h"

namespace mxattn::cpu {

void run_combine(const CombineArgs& args, int threads) {
  combine_partials(args, threads);
}

}  // namespace mxattn::cpu
