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

// n elements of T, zero, the first at a multiple of Align bytes (a power of two).
template <class T, size_t Align = 64>
Aligned<T, Align> zeroed(int64_t n) {
  T* p = static_cast<T*>(::operator new[](size_t(n) * sizeof(T), std::align_val_t(Align)));
  std::fill(p, p + n, T(0));
  return Aligned<T, Align>(p);
}

}  // namespace mxattn::cpu
