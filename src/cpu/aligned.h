// Zeroed scratch aligned to a cache line, owned (the CPU engine's scratch; tests hand the same to
// kernels that load aligned vectors).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

namespace mxattn::cpu {

template <class T>
struct AlignedDelete {
  void operator()(T* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
template <class T>
using Aligned = std::unique_ptr<T[], AlignedDelete<T>>;

// n elements of T, zero, the first at a multiple of 64 bytes.
template <class T>
Aligned<T> zeroed(int64_t n) {
  T* p = static_cast<T*>(::operator new[](size_t(n) * sizeof(T), std::align_val_t(64)));
  std::fill(p, p + n, T(0));
  return Aligned<T>(p);
}

}  // namespace mxattn::cpu
