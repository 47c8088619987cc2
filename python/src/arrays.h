// DLPack arrays (any framework, through nanobind) seen as mxattn tensor views, without copies, and
// mxattn errors raised as Python exceptions.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn::python {

namespace nb = nanobind;

// Read-only arrays for inputs (a read-only NumPy array is a fine input) and writable ones for
// outputs.
using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

// Where an array's memory can be read from: the host (CPU, pinned or managed memory), or one GPU.
struct Placement {
  bool on_gpu = false;
  int device_id = 0;

  bool operator==(const Placement&) const = default;
  std::string describe() const;
};

Placement placement_of(int dlpack_device_type, int device_id, std::string_view name);

template <class Array>
Placement placement_of(const Array& array, std::string_view name) {
  return placement_of(array.device_type(), array.device_id(), name);
}

// Parses an element type name ("f32", "bf16", "e4m3", "mxfp4", ...); raises ValueError naming
// `name`.
DType parse_element_type(std::string_view name, std::string_view type_name);

// The view of `array`'s memory as elements of `type`. Frameworks have no MX types, so MX codes
// and E8M0 scales come as 8-bit arrays; packed FP6 and FP4 rows come as their bytes (FP6: 3 bytes
// per 4 elements, FP4: 1 byte per 2 elements) along a contiguous last axis, and the view's last
// axis counts elements. bf16 comes as bfloat16 or as its 16-bit pattern. Raises ValueError naming
// `name` when the storage cannot hold `type`.
TensorView view_of(std::string_view name, int rank, const int64_t* shape, const int64_t* strides,
                   nb::dlpack::dtype storage, const void* data, DType type);

template <class Array>
TensorView view_of(std::string_view name, const Array& array, DType type) {
  if (array.ndim() > size_t(kMaxRank)) {
    throw nb::value_error((std::string(name) + " has rank " + std::to_string(array.ndim()) +
                           "; mxattn views hold at most " + std::to_string(kMaxRank) + " axes")
                              .c_str());
  }
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  for (size_t i = 0; i < array.ndim(); ++i) {
    shape[i] = int64_t(array.shape(i));
    strides[i] = array.stride(i);
  }
  return view_of(name, int(array.ndim()), shape, strides, array.dtype(), array.data(), type);
}

// Raises the Python exception of a failed status: ValueError for invalid arguments (the message
// unchanged), NotImplementedError for what an engine does not support, MemoryError, RuntimeError.
[[noreturn]] void raise_status(const Status& failed);
inline void raise_if_failed(const Status& status) {
  if (!status.is_ok()) raise_status(status);
}

}  // namespace mxattn::python
