// The MPI ranks as if their tensors lived on GPUs: a communicator that reports GPU memory but keeps
// it in host buffers, so that the GPU path of the exchanges (shards staged to the host to quantize,
// attention on host copies, outputs copied back) runs, and is checked, where there is no GPU.
#pragma once

#include <cstring>

#include "mxattn/dist.h"

namespace mxattn::test {

class StagedCommunicator final : public dist::Communicator {
 public:
  explicit StagedCommunicator(dist::Communicator& ranks) : ranks_(ranks) {}

  dist::Backend backend() const override { return ranks_.backend(); }
  dist::MemorySpace memory() const override { return dist::MemorySpace::cuda; }
  int rank() const override { return ranks_.rank(); }
  int size() const override { return ranks_.size(); }

  Status all_to_all(const void* send, const int64_t* send_counts, const int64_t* send_displs,
                    void* recv, const int64_t* recv_counts, const int64_t* recv_displs) override {
    return ranks_.all_to_all(send, send_counts, send_displs, recv, recv_counts, recv_displs);
  }
  Status all_gather(const void* mine, int64_t bytes, void* all) override {
    return ranks_.all_gather(mine, bytes, all);
  }
  Status all_reduce_max(float* values, int64_t count) override {
    return ranks_.all_reduce_max(values, count);
  }
  Status allocate(int64_t bytes, void** data) override { return ranks_.allocate(bytes, data); }
  void deallocate(void* data) override { ranks_.deallocate(data); }
  Status copy_2d(const dist::Copy2D* copies, int64_t count) override {
    return ranks_.copy_2d(copies, count);
  }
  Status copy_to_host(void* host, const void* data, int64_t bytes) override {
    ++staged_;
    std::memcpy(host, data, size_t(bytes));
    return Status::ok();
  }
  Status copy_from_host(void* data, const void* host, int64_t bytes) override {
    ++staged_;
    std::memcpy(data, host, size_t(bytes));
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }

  // Copies between "device" and host so far: the GPU path did run.
  int64_t staged_copies() const { return staged_; }

 private:
  dist::Communicator& ranks_;
  int64_t staged_ = 0;
};

}  // namespace mxattn::test
