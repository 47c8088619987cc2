// Device memory for the GPU tests: one allocation of exactly a host buffer's bytes (so that
// compute-sanitizer flags any access past it), with uploads and downloads that throw on a CUDA
// error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "mxattn/tensor.h"

namespace mxattn::test {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// One device allocation of exactly a host vector's bytes.
class DeviceBytes {
 public:
  explicit DeviceBytes(const std::vector<uint8_t>& host) : size_(host.size()) {
    check(cudaMalloc(&data_, size_ == 0 ? 1 : size_), "cudaMalloc");
    upload(host);
  }
  template <class T>
  explicit DeviceBytes(const std::vector<T>& host)
      : DeviceBytes(std::vector<uint8_t>(
            reinterpret_cast<const uint8_t*>(host.data()),
            reinterpret_cast<const uint8_t*>(host.data()) + host.size() * sizeof(T))) {}
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() { cudaFree(data_); }

  void* data() const { return data_; }
  void upload(const std::vector<uint8_t>& host) {
    if (size_ > 0) check(cudaMemcpy(data_, host.data(), size_, cudaMemcpyHostToDevice), "upload");
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(size_);
    if (size_ > 0) check(cudaMemcpy(out.data(), data_, size_, cudaMemcpyDeviceToHost), "download");
    return out;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A view of `v`'s shape and strides over device memory.
inline TensorView on_device(const TensorView& v, const DeviceBytes& d) {
  TensorView out = v;
  out.data = d.data();
  return out;
}

}  // namespace mxattn::test
