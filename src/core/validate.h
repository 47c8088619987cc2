// Argument checking at the API edge (spec §7). Engines never re-check.
#pragma once

#include <string_view>

#include "core/problem.h"
#include "mxattn/combine.h"

namespace mxattn::core {

// Checks a combine call's arguments (shapes, dtypes, bytes backed, counts in [0, S]).
Status validate_combine(const CombineArgs& args);

// Checks that the optional partial outputs hold at least `slots` splits.
Status validate_partial_slots(const AttentionArgs& args, int64_t slots);

}  // namespace mxattn::core
