// A buffer in a communicator's memory, freed with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "mxattn/dist.h"

namespace mxattn::dist {

class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    release();
    comm_ = std::exchange(other.comm_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
  }
  ~Buffer() { release(); }

  static Status allocate(Communicator& comm, int64_t bytes, Buffer* out) {
    void* data = nullptr;
    if (Status st = comm.allocate(bytes, &data); !st) return st;
    Buffer b;
    b.comm_ = &comm;
    b.data_ = static_cast<std::byte*>(data);
    b.bytes_ = bytes;
    *out = std::move(b);
    return Status::ok();
  }

  std::byte* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  void release() {
    if (data_ != nullptr) comm_->deallocate(data_);
    data_ = nullptr;
  }

  Communicator* comm_ = nullptr;
  std::byte* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace mxattn::dist
