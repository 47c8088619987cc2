// A ragged batch (spec §10) as the padded problems it equals: one AttentionArgs per sequence, every
// view of it a view into the ragged call's memory.
#pragma once

#include <vector>

#include "mxattn/ragged.h"
#include "mxattn/status.h"

namespace mxattn::core {

struct SequenceArgs {
  int64_t b = 0;
  AttentionArgs args;  // batch 1: sequence b's rows, keys, masks and outputs
};

// Checks the ragged call's own arguments (ranks, cu_seqlens_q, seq_lens, the LSE layout) and cuts
// it into sequences, skipping those without query rows. Each sequence's AttentionArgs is left for
// validate_problem, whose messages the caller prefixes with the sequence.
Status split_ragged(const RaggedArgs& a, std::vector<SequenceArgs>* out);

}  // namespace mxattn::core
