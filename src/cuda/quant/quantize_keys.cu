// quantize_keys on the GPU (spec §5's producer transforms, then the quantizer): each key row is
// rotated into an f32 temporary (one thread a row, through mx/kv_rows.h's host/device rotation),
// each (batch, head, column) mean taken over the sequence's valid keys in the host's order and
// subtracted (one thread a column), and the temporary quantized by the GPU quantizer. Every step is
// the host's arithmetic in the host's order, so the bits are the host's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/quant/quant.h"
#include "mx/kv_rows.h"

namespace mxattn::cuda::quant {
namespace {

constexpr int kMaxRotatedDim = 512;
constexpr int kThreads = 256;

struct RowParams {
  const void* k = nullptr;
  DType k_type = DType::f32;
  int64_t k_stride[4] = {};
  float* work = nullptr;  // [B, Sk, Hkv, D] contiguous
  int64_t batch = 0, seq = 0, heads = 0, dim = 0;
  bool rotate = false;
};

__global__ void rows_kernel(const __grid_constant__ RowParams p) {
  const int64_t rows = p.batch * p.seq * p.heads;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r % p.heads, j = (r / p.heads) % p.seq, b = r / (p.heads * p.seq);
    const uint8_t* src = mx::element_address(
        p.k, p.k_type, b * p.k_stride[0] + j * p.k_stride[1] + h * p.k_stride[2]);
    float* out = p.work + r * p.dim;
    if (p.rotate) {
      double scratch[kMaxRotatedDim];
      mx::prepare_row(src, p.k_type, p.k_stride[3], p.dim, true, nullptr, 0, out, scratch);
    } else {
      mx::prepare_row(src, p.k_type, p.k_stride[3], p.dim, false, nullptr, 0, out, nullptr);
    }
  }
}

struct MeanParams {
  float* work = nullptr;
  float* k_mean = nullptr;
  int64_t mean_stride[3] = {};
  const int32_t* kv_len = nullptr;
  int64_t kv_len_stride = 0;
  int64_t batch = 0, seq = 0, heads = 0, dim = 0;
};

// The mean of column (b, h, d) over the sequence's valid keys, summed in f64 in key order as the
// host sums it, then subtracted from those keys.
__global__ void mean_kernel(const __grid_constant__ MeanParams p) {
  const int64_t columns = p.batch * p.heads * p.dim;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = c % p.dim, h = (c / p.dim) % p.heads, b = c / (p.dim * p.heads);
    const int64_t valid = p.kv_len == nullptr
                              ? p.seq
                              : min(p.seq, max(int64_t(0), int64_t(p.kv_len[b * p.kv_len_stride])));
    const int64_t step = p.heads * p.dim;
    float* column = p.work + (b * p.seq * p.heads + h) * p.dim + d;
    double sum = 0.0;
    for (int64_t j = 0; j < valid; ++j) sum += column[j * step];
    const float mean = valid > 0 ? float(sum / double(valid)) : 0.0f;
    p.k_mean[b * p.mean_stride[0] + h * p.mean_stride[1] + d * p.mean_stride[2]] = mean;
    for (int64_t j = 0; j < valid; ++j) column[j * step] -= mean;
  }
}

template <class Params>
Status launch_threads(const void* kernel, Params& p, int64_t tasks, void* stream,
                      const char* what) {
  if (tasks == 0) return Status::ok();
  const int64_t ctas = std::min<int64_t>((tasks + kThreads - 1) / kThreads, int64_t(1) << 16);
  detail::KernelRef ref{kernel, 0, false};
  return detail::launch(ref, dim3(unsigned(ctas)), dim3(kThreads), p, stream, false, what);
}

}  // namespace

Status quantize_keys(const TensorView& k, const TensorView& data, const TensorView& scales,
                     ScaleMode mode, const KeyTransforms& t, void* stream) {
  const int64_t batch = k.shape[0], seq = k.shape[1], heads = k.shape[2], dim = k.shape[3];
  if (t.rotate && dim > kMaxRotatedDim) {
    return Status::unsupported("rotate: the GPU rotates keys of at most 512 head-dim elements");
  }
  const int64_t elements = batch * seq * heads * dim;
  const auto s = static_cast<cudaStream_t>(stream);
  float* work = nullptr;
  if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&work),
                                      size_t(std::max<int64_t>(elements, 1)) * sizeof(float), s);
      e != cudaSuccess) {
    return detail::cuda_failure("quantize_keys temporary", e);
  }
  RowParams rp;
  rp.k = k.data;
  rp.k_type = k.dtype;
  std::copy(k.stride, k.stride + 4, rp.k_stride);
  rp.work = work;
  rp.batch = batch;
  rp.seq = seq;
  rp.heads = heads;
  rp.dim = dim;
  rp.rotate = t.rotate;
  // Every step runs on the stream; the temporary is released on it whatever happened.
  const auto steps = [&]() -> Status {
    if (Status st = launch_threads(reinterpret_cast<const void*>(&rows_kernel), rp,
                                   batch * seq * heads, stream, "quantize_keys rows launch");
        !st) {
      return st;
    }
    if (t.k_mean.given()) {
      MeanParams mp;
      mp.work = work;
      mp.k_mean = static_cast<float*>(t.k_mean.data);
      std::copy(t.k_mean.stride, t.k_mean.stride + 3, mp.mean_stride);
      if (t.kv_len.given()) {
        mp.kv_len = static_cast<const int32_t*>(t.kv_len.data);
        mp.kv_len_stride = t.kv_len.stride[0];
      }
      mp.batch = batch;
      mp.seq = seq;
      mp.heads = heads;
      mp.dim = dim;
      if (Status st = launch_threads(reinterpret_cast<const void*>(&mean_kernel), mp,
                                     batch * heads * dim, stream, "quantize_keys mean launch");
          !st) {
        return st;
      }
    }
    const TensorView work_view = make_view(work, DType::f32, {batch, seq, heads, dim});
    return cuda::quant::quantize(work_view, data, scales, 3, mode, stream);
  };
  const Status st = steps();
  const cudaError_t freed = cudaFreeAsync(work, s);
  if (!st) return st;
  return freed == cudaSuccess ? Status::ok()
                              : detail::cuda_failure("quantize_keys temporary", freed);
}

}  // namespace mxattn::cuda::quant
