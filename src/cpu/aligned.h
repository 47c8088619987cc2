// Zeroed scratch aligned to a cache line (or a page), owned (the CPU engine's scratch; tests and
// benchmarks hand the same to kernels that load aligned vectors).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace mxattn::cpu {

template <class T, size_t Align = 64>
struct AlignedDelete {
  void operator()(T* p) const { ::operator delete[](p, std::align_val_t(Align)); }
};
template <class T, size_t Align = 64>
using Aligned = std::unique_ptr<T[], AlignedDelete<T, Align>>;

// n elements of T, not initialized, the first at a multiple of Align bytes (a power of two): for
// buffers whose every element is written before it is read.
template <class T, size_t Align = 64>
Aligned<T, Align> uninitialized(int64_t n) {
  return Aligned<T, Align>(
      static_cast<T*>(::operator new[](size_t(n) * sizeof(T), std::align_val_t(Align))));
}

// n elements of T, zero, the first at a multiple of Align bytes (a power of two).
template <class T, size_t Align = 64>
Aligned<T, Align> zeroed(int64_t n) {
  Aligned<T, Align> a = uninitialized<T, Align>(n);
  std::fill(a.get(), a.get() + n, T(0));
  return a;
}

}  // namespace mxattn::cpu
