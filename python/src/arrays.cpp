#include "arrays.h"

#include <optional>

namespace mxattn::python {

namespace {

// DLPack device types (dlpack.h's DLDeviceType).
constexpr int kDLCPU = 1;
constexpr int kDLCUDA = 2;
constexpr int kDLCUDAHost = 3;
constexpr int kDLCUDAManaged = 13;

// DLPack type codes (dlpack.h's DLDataTypeCode). Codes 7 and up are the 8-bit float types of
// DLPack 1.1 (float8_e4m3fn, float8_e5m2, float8_e8m0fnu, ...), whose bytes are MX codes or scales.
constexpr uint8_t kDLInt = 0;
constexpr uint8_t kDLUInt = 1;
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBfloat = 4;
constexpr uint8_t kDLBool = 6;
constexpr uint8_t kDLFirstFloat8 = 7;

[[noreturn]] void raise_value_error(const std::string& message) {
  throw nb::value_error(message.c_str());
}

std::string storage_name(nb::dlpack::dtype s) {
  const char* kind = s.code == kDLInt      ? "int"
                     : s.code == kDLUInt   ? "uint"
                     : s.code == kDLFloat  ? "float"
                     : s.code == kDLBfloat ? "bfloat"
                     : s.code == kDLBool   ? "bool"
                                           : "dlpack-code-";
  std::string name = kind;
  if (s.code > kDLBool) name += std::to_string(int(s.code)) + "/";
  name += std::to_string(int(s.bits));
  if (s.lanes != 1) name += "x" + std::to_string(int(s.lanes));
  return name;
}

bool storage_holds(nb::dlpack::dtype s, DType type) {
  if (s.lanes != 1) return false;
  switch (type) {
    case DType::f32:
      return s.code == kDLFloat && s.bits == 32;
    case DType::f16:
      return s.code == kDLFloat && s.bits == 16;
    case DType::bf16:
      return s.bits == 16 && (s.code == kDLBfloat || s.code == kDLUInt || s.code == kDLInt);
    case DType::i32:
      return s.code == kDLInt && s.bits == 32;
    case DType::i64:
      return s.code == kDLInt && s.bits == 64;
    default:  // MX codes and E8M0 scales: bytes
      return s.bits == 8 && (s.code == kDLUInt || s.code == kDLInt || s.code >= kDLFirstFloat8);
  }
}

std::string storage_expected(DType type) {
  switch (type) {
    case DType::f32:
      return "float32";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16 (or its bits as uint16)";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    default:
      return "8-bit storage (uint8 bytes)";
  }
}

// An element stride from a byte stride of packed storage, when whole elements fit in it.
std::optional<int64_t> packed_stride(int64_t byte_stride, int bits) {
  if ((byte_stride * 8) % bits != 0) return std::nullopt;
  return byte_stride * 8 / bits;
}

}  // namespace

std::string Placement::describe() const {
  return on_gpu ? "cuda:" + std::to_string(device_id) : std::string("cpu");
}

Placement placement_of(int dlpack_device_type, int device_id, std::string_view name) {
  switch (dlpack_device_type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLCUDAManaged:
      return {false, 0};
    case kDLCUDA:
      return {true, device_id};
    default:
      raise_value_error(std::string(name) + " lives on DLPack device type " +
                        std::to_string(dlpack_device_type) +
                        "; mxattn reads host memory and CUDA device memory");
  }
}

DType parse_element_type(std::string_view name, std::string_view type_name) {
  if (std::optional<DType> t = parse_dtype(type_name)) return *t;
  raise_value_error(std::string(name) + ": unknown element type '" + std::string(type_name) +
                    "' (f32, f16, bf16, e4m3, e5m2, e2m3, e3m2, e2m1, e8m0, i32, i64)");
}

TensorView view_of(std::string_view name, int rank, const int64_t* shape, const int64_t* strides,
                   nb::dlpack::dtype storage, const void* data, DType type) {
  const std::string who(name);
  if (rank == 0) raise_value_error(who + " is a 0-d array; mxattn takes tensors of rank >= 1");
  if (!storage_holds(storage, type)) {
    raise_value_error(who + " holds " + storage_name(storage) + " elements; as " +
                      std::string(name_of(type)) + " it must be " + storage_expected(type));
  }
  TensorView v;
  v.data = const_cast<void*>(data);  // inputs are only read: the API's views are not const-typed
  v.dtype = type;
  v.rank = rank;
  for (int i = 0; i < rank; ++i) {
    v.shape[i] = shape[i];
    v.stride[i] = strides[i];
  }
  const int bits = bits_of(type);
  if (bits < 8) {
    const int64_t last_bytes = shape[rank - 1];
    if (last_bytes > 1 && strides[rank - 1] != 1) {
      raise_value_error(who + " holds packed " + std::string(name_of(type)) +
                        " bytes: its last axis needs stride 1, found " +
                        std::to_string(strides[rank - 1]));
    }
    if ((last_bytes * 8) % bits != 0) {
      raise_value_error(who + " holds packed " + std::string(name_of(type)) + " bytes (" +
                        std::to_string(pack_group(type)) + " elements in " +
                        std::to_string(pack_group(type) * bits / 8) + " bytes): its last axis of " +
                        std::to_string(last_bytes) + " bytes is not a whole number of groups");
    }
    v.shape[rank - 1] = last_bytes * 8 / bits;
    v.stride[rank - 1] = 1;
    for (int i = 0; i + 1 < rank; ++i) {
      const std::optional<int64_t> s = packed_stride(strides[i], bits);
      if (!s) {
        raise_value_error(who + " holds packed " + std::string(name_of(type)) +
                          " bytes: the stride of axis " + std::to_string(i) + " (" +
                          std::to_string(strides[i]) +
                          " bytes) does not start its rows on a whole group");
      }
      v.stride[i] = *s;
    }
  }
  // The array covers exactly its own elements, so the bytes backed are the bytes its view needs;
  // a view whose size overflows gets 0 and validation reports the overflow.
  v.bytes = bytes_needed(v).value_or(0);
  return v;
}

void raise_status(const Status& failed) {
  PyObject* type = PyExc_RuntimeError;
  switch (failed.code()) {
    case ErrorCode::invalid_argument:
      type = PyExc_ValueError;
      break;
    case ErrorCode::unsupported:
      type = PyExc_NotImplementedError;
      break;
    case ErrorCode::out_of_memory:
      type = PyExc_MemoryError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, failed.message().c_str());
  throw nb::python_error();
}

}  // namespace mxattn::python
