#include "mxattn/tensor.h"

#include <cstdint>

namespace mxattn {

int64_t TensorView::numel() const {
  if (rank == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void set_contiguous_strides(TensorView& v) {
  // A shape whose size overflows gets saturated strides; bytes_needed then reports the overflow.
  int64_t stride = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.stride[i] = stride;
    if (i > 0 && __builtin_mul_overflow(stride, v.shape[i], &stride)) stride = INT64_MAX;
  }
}

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, int64_t bytes) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = int(shape.size());
  int i = 0;
  for (int64_t d : shape) v.shape[i++] = d;
  set_contiguous_strides(v);
  v.bytes = bytes >= 0 ? bytes : bytes_needed(v).value_or(0);
  return v;
}

std::optional<int64_t> contiguous_bytes(DType dtype, int64_t numel) {
  int64_t bits;
  if (numel < 0 || __builtin_mul_overflow(numel, int64_t(bits_of(dtype)), &bits)) {
    return std::nullopt;
  }
  return (bits + 7) / 8;
}

std::optional<int64_t> bytes_needed(const TensorView& v) {
  if (v.rank <= 0 || v.rank > kMaxRank)
    return v.rank == 0 ? std::optional<int64_t>(0) : std::nullopt;
  bool empty = false;
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] < 0 || v.stride[i] < 0) return std::nullopt;
    empty = empty || v.shape[i] == 0;
  }
  if (empty) return 0;
  int64_t last = 0;  // element offset of the farthest element
  for (int i = 0; i < v.rank; ++i) {
    int64_t span;
    if (__builtin_mul_overflow(v.shape[i] - 1, v.stride[i], &span) ||
        __builtin_add_overflow(last, span, &last)) {
      return std::nullopt;
    }
  }
  int64_t end;
  if (__builtin_add_overflow(last, int64_t(1), &end)) return std::nullopt;
  return contiguous_bytes(v.dtype, end);
}

TensorView permuted(const TensorView& v, std::initializer_list<int> order) {
  TensorView p = v;
  int i = 0;
  for (int axis : order) {
    p.shape[i] = v.shape[axis];
    p.stride[i] = v.stride[axis];
    ++i;
  }
  return p;
}

}  // namespace mxattn
