// An owning host tensor (for the CLI, tests and benchmarks): a buffer plus a contiguous view of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <vector>

#include "base/float16.h"
#include "mxattn/tensor.h"

namespace mxattn::base {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::initializer_list<int64_t> shape)
      : HostTensor(dtype, std::vector<int64_t>(shape)) {}
  HostTensor(DType dtype, const std::vector<int64_t>& shape) {
    view_.dtype = dtype;
    view_.rank = int(shape.size());
    for (int i = 0; i < view_.rank; ++i) view_.shape[i] = shape[i];
    set_contiguous_strides(view_);
    view_.bytes = bytes_needed(view_).value_or(0);
    // +1: non-null for empty tensors. Aligned to a page: malloc would put a large buffer 16 bytes
    // past a page boundary, so that every 64-byte row of a KV cache spanned two cache lines.
    storage_.reset(new (std::align_val_t(kAlignment)) std::byte[size_t(view_.bytes) + 1]());
    view_.data = storage_.get();
  }

  const TensorView& view() const { return view_; }
  TensorView& view() { return view_; }
  template <class T>
  T* data() const {
    return reinterpret_cast<T*>(view_.data);
  }
  int64_t numel() const { return view_.numel(); }
  int64_t bytes() const { return view_.bytes; }

 private:
  static constexpr size_t kAlignment = 4096;
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(kAlignment)); }
  };
  std::unique_ptr<std::byte[], AlignedDelete> storage_;
  TensorView view_;
};

// Value i (in memory order) of a contiguous f32, f16 or bf16 tensor, as float.
inline float load_float(const TensorView& v, int64_t i) {
  switch (v.dtype) {
    case DType::f16:
      return f16_to_float(static_cast<const uint16_t*>(v.data)[i]);
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(v.data)[i]);
    default:
      return static_cast<const float*>(v.data)[i];
  }
}

// Stores value i (in memory order) of a contiguous f32, f16 or bf16 tensor.
inline void store_float(const TensorView& v, int64_t i, float x) {
  switch (v.dtype) {
    case DType::f16:
      static_cast<uint16_t*>(v.data)[i] = float_to_f16(x);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(v.data)[i] = float_to_bf16(x);
      break;
    default:
      static_cast<float*>(v.data)[i] = x;
  }
}

}  // namespace mxattn::base
