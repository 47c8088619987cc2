#include "dist/host_memory.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace mxattn::dist {
namespace {

// Cache-line aligned, as the CPU engines' vector loads prefer.
constexpr std::align_val_t kAlignment{64};

// Below this many bytes a copy is not worth waking the thread team.
constexpr int64_t kParallelBytes = int64_t(1) << 20;

}  // namespace

Status host_allocate(int64_t bytes, void** data) {
  // At least one byte, so that an empty tensor still has a non-null pointer.
  void* p = ::operator new(size_t(bytes > 0 ? bytes : 1), kAlignment, std::nothrow);
  if (p == nullptr) {
    return Status::runtime("out of host memory allocating " + std::to_string(bytes) + " bytes");
  }
  *data = p;
  return Status::ok();
}

void host_deallocate(void* data) {
  ::operator delete(data, kAlignment);
}

void host_copy_2d(const Copy2D* copies, int64_t count) {
  // Row n of the whole list is row n - first_row[c] of copy c.
  std::vector<int64_t> first_row(size_t(count) + 1, 0);
  int64_t bytes = 0;
  for (int64_t c = 0; c < count; ++c) {
    first_row[size_t(c) + 1] = first_row[size_t(c)] + copies[c].height;
    bytes += copies[c].width * copies[c].height;
  }
  const int64_t rows = first_row[size_t(count)];
#pragma omp parallel if (bytes >= kParallelBytes)
  {
    int64_t c = 0;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < rows; ++n) {
      while (first_row[size_t(c) + 1] <= n) ++c;
      while (first_row[size_t(c)] > n) --c;
      const Copy2D& copy = copies[c];
      const int64_t row = n - first_row[size_t(c)];
      std::memcpy(static_cast<std::byte*>(copy.dst) + row * copy.dst_pitch,
                  static_cast<const std::byte*>(copy.src) + row * copy.src_pitch,
                  size_t(copy.width));
    }
  }
}

}  // namespace mxattn::dist
