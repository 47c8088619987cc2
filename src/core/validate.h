// Argument checking at the API edge (SPEC 7). Engines never re-check.
#pragma once

#include <string_view>

#include "core/problem.h"
#include "mxattn/combine.h"

namespace mxattn::core {

// Everything about a view's memory: non-negative strides, packing of FP6/FP4 rows, a 64-bit size
// and the bytes backed (SPEC 7's "K scales need N bytes for shape [...] but only M are backed").
// The one such check, used by the attention and combine validation and by the MX tensor functions.
Status check_storage(std::string_view name, const TensorView& v);

// Checks a combine call's arguments (shapes, dtypes, bytes backed, counts in [0, S]).
Status validate_combine(const CombineArgs& args);

// Checks that the optional partial outputs hold at least `slots` splits.
Status validate_partial_slots(const AttentionArgs& args, int64_t slots);

}  // namespace mxattn::core
