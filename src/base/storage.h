// The check of a view's memory, shared by every validator.
#pragma once

#include <string>
#include <string_view>

#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn::base {

// Everything about a view's memory: non-negative strides, packing of FP6/FP4 rows, a 64-bit size
// and the bytes backed ("K scales need N bytes for shape [...] but only M are backed").
Status check_storage(std::string_view name, const TensorView& v);

// "[s0, s1, ...]": a view's strides, for messages.
std::string strides_string(const TensorView& v);

// Plural argument names ("K scales", "counts") read "need", the others "needs".
std::string_view need_verb(std::string_view name);

}  // namespace mxattn::base
