#include "cuda/common/device_args.h"

#include <cuda_runtime.h>

#include <string>

#include "mxattn/cuda.h"

namespace mxattn::cuda {
namespace {

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::runtime(std::string(what) + ": " + cudaGetErrorString(e));
}

std::vector<TensorView*> tensor_views(AttentionArgs& a) {
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

// Bytes from the view's pointer to its farthest element (strides are non-negative once validated).
int64_t logical_bytes(const TensorView& v) {
  return v.given() ? bytes_needed(v).value_or(0) : 0;
}

Status copy_views(const std::vector<const TensorView*>& from,
                  const std::vector<const TensorView*>& to, cudaMemcpyKind kind) {
  for (size_t n = 0; n < from.size(); ++n) {
    const int64_t bytes = logical_bytes(*to[n]);
    if (bytes == 0) continue;
    if (Status st =
            check(cudaMemcpy(to[n]->data, from[n]->data, size_t(bytes), kind), "cudaMemcpy");
        !st) {
      return st;
    }
  }
  return Status::ok();
}

}  // namespace

DeviceArgs::~DeviceArgs() {
  for (void* d : allocations_) cudaFree(d);
}

Status DeviceArgs::upload(const AttentionArgs& host, DeviceArgs* out) {
  if (Status st = validate(host); !st) return st;
  out->args_ = host;
  for (TensorView* v : tensor_views(out->args_)) {
    const int64_t bytes = logical_bytes(*v);
    if (bytes == 0) continue;
    void* d = nullptr;
    if (Status st = check(cudaMalloc(&d, size_t(bytes)), "cudaMalloc"); !st) return st;
    out->allocations_.push_back(d);
    if (Status st =
            check(cudaMemcpy(d, v->data, size_t(bytes), cudaMemcpyHostToDevice), "cudaMemcpy");
        !st) {
      return st;
    }
    v->data = d;
    v->bytes = bytes;
  }
  return Status::ok();
}

Status DeviceArgs::upload_inputs(const AttentionArgs& host) const {
  return copy_views(input_views(host), input_views(args_), cudaMemcpyHostToDevice);
}

Status DeviceArgs::poison_outputs() const {
  for (const TensorView* v : output_views(args_)) {
    const int64_t bytes = logical_bytes(*v);
    if (bytes == 0) continue;
    if (Status st = check(cudaMemset(v->data, 0xff, size_t(bytes)), "cudaMemset"); !st) return st;
  }
  return Status::ok();
}

Status DeviceArgs::download_outputs(const AttentionArgs& host) const {
  return copy_views(output_views(args_), output_views(host), cudaMemcpyDeviceToHost);
}

}  // namespace mxattn::cuda
