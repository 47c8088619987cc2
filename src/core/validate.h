// Argument checking at the API edge (spec §7). Engines never re-check.
#pragma once

#include <string_view>

#include "core/problem.h"
#include "mxattn/combine.h"
#include "mxattn/kv_cache.h"

namespace mxattn::core {

// Checks a combine call's arguments (shapes, dtypes, bytes backed) and, where `counts_readable`
// (host memory), every count in [0, S].
Status validate_combine(const CombineArgs& args, bool counts_readable = true);

// Checks a two-state merge's arguments.
Status validate_merge(const MergeArgs& args);

// Checks a cache write's arguments (spec §11); with `slots_readable` (the slot mapping in host
// memory) also every slot: inside the caches, none named twice.
Status validate_write_kv(const KvWriteArgs& args, bool slots_readable);

// Checks that the optional partial outputs hold at least `slots` splits.
Status validate_partial_slots(const AttentionArgs& args, int64_t slots);

}  // namespace mxattn::core
