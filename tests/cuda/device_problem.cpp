#include "cuda/device_problem.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mxattn::test {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The views a run reads or writes on the device.
std::vector<TensorView*> device_views(AttentionArgs& a) {
  return {&a.q,
          &a.k,
          &a.v,
          &a.o,
          &a.lse,
          &a.q_scales,
          &a.k_scales,
          &a.v_scales,
          &a.split.partial_o,
          &a.split.partial_lse,
          &a.split.counts};
}

std::vector<const TensorView*> input_views(const AttentionArgs& a) {
  return {&a.q, &a.k, &a.v, &a.q_scales, &a.k_scales, &a.v_scales};
}

std::vector<const TensorView*> output_views(const AttentionArgs& a) {
  return {&a.o, &a.lse, &a.split.partial_o, &a.split.partial_lse, &a.split.counts};
}

int64_t logical_bytes(const TensorView& v) {
  return v.given() ? bytes_needed(v).value_or(0) : 0;
}

}  // namespace

DeviceProblem::DeviceProblem(const TestProblem& host) : args_(host.args()) {
  for (TensorView* v : device_views(args_)) {
    const int64_t bytes = logical_bytes(*v);
    if (bytes == 0) continue;
    void* d = nullptr;
    check(cudaMalloc(&d, size_t(bytes)), "cudaMalloc");
    allocations_.push_back(d);
    check(cudaMemcpy(d, v->data, size_t(bytes), cudaMemcpyHostToDevice), "upload");
    v->data = d;
    v->bytes = bytes;
  }
}

DeviceProblem::~DeviceProblem() {
  for (void* d : allocations_) cudaFree(d);
}

void DeviceProblem::upload_inputs(const TestProblem& host) {
  const std::vector<const TensorView*> from = input_views(host.args());
  const std::vector<const TensorView*> to = input_views(args_);
  for (size_t n = 0; n < from.size(); ++n) {
    const int64_t bytes = logical_bytes(*to[n]);
    if (bytes == 0) continue;
    check(cudaMemcpy(to[n]->data, from[n]->data, size_t(bytes), cudaMemcpyHostToDevice), "upload");
  }
}

void DeviceProblem::poison_outputs() {
  for (const TensorView* v : output_views(args_)) {
    const int64_t bytes = logical_bytes(*v);
    if (bytes > 0) check(cudaMemset(v->data, 0xff, size_t(bytes)), "poison");
  }
}

void DeviceProblem::download_outputs(const TestProblem& host) const {
  const std::vector<const TensorView*> from = output_views(args_);
  const std::vector<const TensorView*> to = output_views(host.args());
  for (size_t n = 0; n < from.size(); ++n) {
    const int64_t bytes = logical_bytes(*from[n]);
    if (bytes == 0) continue;
    check(cudaMemcpy(to[n]->data, from[n]->data, size_t(bytes), cudaMemcpyDeviceToHost),
          "download");
  }
}

}  // namespace mxattn::test
