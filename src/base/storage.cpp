// The one check of a view's memory: non-negative strides, packing of FP6/FP4 rows, a 64-bit size
// and the bytes backed (spec §7). Used by the attention and combine validation and by the MX
// tensor functions.
#include "base/storage.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/text.h"

namespace mxattn::base {

std::string strides_string(const TensorView& v) {
  std::string s = "[";
  for (int i = 0; i < v.rank; ++i) s += cat(i ? ", " : "", v.stride[i]);
  return s + "]";
}

std::string_view need_verb(std::string_view name) {
  return name.ends_with('s') ? "need" : "needs";
}

namespace {

template <class... Parts>
Status invalid(const Parts&... parts) {
  return Status::invalid(cat(parts...));
}

// Packed types (FP6, FP4) start every row at a byte boundary, so engines can address whole groups.
Status check_packing(std::string_view name, const TensorView& v) {
  const int group = pack_group(v.dtype);
  if (group == 1) return Status::ok();
  if (v.stride[v.rank - 1] != 1) {
    return invalid(name, " is ", name_of(v.dtype), " (packed ", group,
                   " to a group): its last axis needs stride 1, found strides ", strides_string(v));
  }
  for (int i = 0; i + 1 < v.rank; ++i) {
    if (v.stride[i] % group != 0) {
      return invalid(name, " is ", name_of(v.dtype), " (packed ", group,
                     " to a group): the stride of axis ", i, " must be a multiple of ", group,
                     ", found strides ", strides_string(v));
    }
  }
  return Status::ok();
}

// Engines index elements with int64_t, so the element count must fit even where zero strides make
// the bytes small.
bool element_count_fits(const TensorView& v) {
  int64_t elements = 1;
  bool overflow = false;
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] == 0) return true;
    overflow |= __builtin_mul_overflow(elements, v.shape[i], &elements);
  }
  return !overflow;
}

}  // namespace

Status check_storage(std::string_view name, const TensorView& v) {
  for (int i = 0; i < v.rank; ++i) {
    if (v.stride[i] < 0) {
      return invalid(name, " strides must be >= 0, found ", strides_string(v), " for shape ",
                     v.shape_string());
    }
  }
  if (Status st = check_packing(name, v); !st) return st;
  const std::optional<int64_t> needed = bytes_needed(v);
  if (!element_count_fits(v) || !needed) {
    return invalid("the size of ", name, " (shape ", v.shape_string(), ", strides ",
                   strides_string(v), ", ", name_of(v.dtype), ") overflows 64-bit sizes");
  }
  if (v.bytes < *needed) {
    return invalid(name, " ", need_verb(name), " ", *needed, " bytes for shape ", v.shape_string(),
                   " but only ", v.bytes, " are backed");
  }
  if (v.data == nullptr && *needed > 0) {
    return invalid(name, " has a null data pointer but ", need_verb(name), " ", *needed, " bytes");
  }
  return Status::ok();
}

}  // namespace mxattn::base
