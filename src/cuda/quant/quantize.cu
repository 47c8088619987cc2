// Whole-tensor MX quantize and dequantize on the GPU (spec §5): one thread per block of 32
// positions along the block axis (and per packing group of columns where the block axis is not
// the last, so no two threads share a byte), through the host's block functions (mx/formats.h),
// so that the codes and scales are the host's to the bit. Positions past the logical extent that
// the views hold are zero-filled, as on the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/launch.h"
#include "cuda/quant/quant.h"
#include "mx/formats.h"
#include "mx/kv_rows.h"

namespace mxattn::cuda::quant {
namespace {

// The block tasks of a quantize or dequantize: the logical tensor's axes other than the block
// axis (and the last axis, where it is not the block axis) enumerate the outer combinations; the
// last axis is cut into groups of `group` columns.
struct Blocks {
  int axis = 0;
  int inner_axis = -1;       // the last axis where it is not the block axis
  int64_t length = 0;        // logical positions along the block axis
  int64_t blocks = 0;        // logical blocks, ceil(length / 32)
  int64_t data_length = 0;   // positions data holds along the block axis (zeros past length)
  int64_t scale_length = 0;  // blocks scales hold (zeros past blocks)
  int64_t task_blocks = 0;   // blocks a thread is given per outer combination and column group
  int64_t inner_length = 1;
  int64_t group = 1;  // columns per thread: the packing group, so no two threads share a byte
  int64_t inner_groups = 1;
  int outer_count = 0;
  int outer_axis[kMaxRank] = {};
  int64_t outer_extent[kMaxRank] = {};
  int64_t tasks = 0;
};

struct View {
  void* data = nullptr;
  DType type = DType::f32;
  int64_t stride[kMaxRank] = {};
};

struct Params {
  Blocks blocks;
  View logical;  // quantize: the source; dequantize: the destination
  View codes;
  View scales;
  ScaleMode mode = ScaleMode::floor;
  // The source's blocks are 32 contiguous 16-bit or f32 values at 16-byte aligned addresses: read
  // them in 16-byte loads.
  bool vector_loads = false;
};

View view_of(const TensorView& v) {
  View out;
  out.data = v.data;
  out.type = v.dtype;
  for (int i = 0; i < v.rank; ++i) out.stride[i] = v.stride[i];
  return out;
}

Blocks blocks_of(const TensorView& logical, const TensorView& data, const TensorView& scales,
                 int axis) {
  Blocks b;
  b.axis = axis;
  b.inner_axis = axis == logical.rank - 1 ? -1 : logical.rank - 1;
  b.length = logical.shape[axis];
  b.blocks = (b.length + kMxBlock - 1) / kMxBlock;
  b.data_length = data.shape[axis];
  b.scale_length = scales.shape[axis];
  b.task_blocks = std::max((b.data_length + kMxBlock - 1) / kMxBlock, b.scale_length);
  if (b.inner_axis >= 0) {
    b.inner_length = logical.shape[b.inner_axis];
    b.group = pack_group(data.dtype);
    b.inner_groups = (b.inner_length + b.group - 1) / b.group;
  }
  b.tasks = b.task_blocks * b.inner_groups;
  for (int i = 0; i < logical.rank; ++i) {
    if (i == axis || i == b.inner_axis) continue;
    b.outer_axis[b.outer_count] = i;
    b.outer_extent[b.outer_count] = logical.shape[i];
    ++b.outer_count;
    b.tasks *= logical.shape[i];
  }
  return b;
}

// Element offsets of a task's outer combination in each view.
struct Task {
  int64_t block = 0;
  int64_t column_begin = 0;
  int64_t column_end = 0;
  int64_t logical = 0, codes = 0, scales = 0;
};

__device__ Task task_at(const Params& p, int64_t t) {
  const Blocks& b = p.blocks;
  Task task;
  const int64_t column_group = t % b.inner_groups;
  t /= b.inner_groups;
  task.block = t % b.task_blocks;
  t /= b.task_blocks;
  for (int i = b.outer_count - 1; i >= 0; --i) {
    const int axis = b.outer_axis[i];
    const int64_t index = t % b.outer_extent[i];
    t /= b.outer_extent[i];
    task.logical += index * p.logical.stride[axis];
    task.codes += index * p.codes.stride[axis];
    task.scales += index * p.scales.stride[axis];
  }
  task.column_begin = column_group * b.group;
  task.column_end = min(b.inner_length, task.column_begin + b.group);
  return task;
}

__device__ int64_t inner_stride(const Params& p, const View& v) {
  return p.blocks.inner_axis < 0 ? 0 : v.stride[p.blocks.inner_axis];
}

// The 32 values of a block whose positions are contiguous, 16-byte aligned.
__device__ void load_vector_block(const View& v, int64_t offset, float* x) {
  if (v.type == DType::f32) {
    const float4* in = reinterpret_cast<const float4*>(static_cast<const float*>(v.data) + offset);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 q = in[i];
      x[4 * i] = q.x;
      x[4 * i + 1] = q.y;
      x[4 * i + 2] = q.z;
      x[4 * i + 3] = q.w;
    }
    return;
  }
  const uint4* in = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(v.data) + offset);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 q = in[i];
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint16_t lo = uint16_t(words[j] & 0xffffu), hi = uint16_t(words[j] >> 16);
      x[8 * i + 2 * j] = v.type == DType::bf16 ? base::bf16_to_float(lo) : base::f16_to_float(lo);
      x[8 * i + 2 * j + 1] =
          v.type == DType::bf16 ? base::bf16_to_float(hi) : base::f16_to_float(hi);
    }
  }
}

__global__ void quantize_kernel(const __grid_constant__ Params p) {
  const Blocks& b = p.blocks;
  const int64_t axis_src = p.logical.stride[b.axis], axis_codes = p.codes.stride[b.axis];
  uint8_t* codes = static_cast<uint8_t*>(p.codes.data);
  uint8_t* scales = static_cast<uint8_t*>(p.scales.data);
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < b.tasks;
       t += int64_t(gridDim.x) * blockDim.x) {
    const Task task = task_at(p, t);
    const int64_t first = task.block * kMxBlock;
    const int count = task.block < b.blocks ? int(min(int64_t(kMxBlock), b.length - first)) : 0;
    const int64_t window_end = min(first + kMxBlock, b.data_length);
    for (int64_t w = task.column_begin; w < task.column_end; ++w) {
      const int64_t src = task.logical + first * axis_src + w * inner_stride(p, p.logical);
      const int64_t dst = task.codes + w * inner_stride(p, p.codes);
      float x[kMxBlock];
      uint8_t block_codes[kMxBlock];
      if (count > 0) {
        if (p.vector_loads && count == kMxBlock) {
          load_vector_block(p.logical, src, x);
        } else {
          for (int i = 0; i < count; ++i) {
            x[i] = mx::load_plain(p.logical.data, p.logical.type, src + i * axis_src);
          }
        }
        const uint8_t scale = mx::quantize_block(p.codes.type, x, count, p.mode, block_codes);
        scales[task.scales + task.block * p.scales.stride[b.axis] + w * inner_stride(p, p.scales)] =
            scale;
      } else if (task.block < b.scale_length) {
        scales[task.scales + task.block * p.scales.stride[b.axis] + w * inner_stride(p, p.scales)] =
            0;
      }
      for (int64_t k = first; k < window_end; ++k) {
        const int i = int(k - first);
        mx::store_code(p.codes.type, codes, dst + k * axis_codes, i < count ? block_codes[i] : 0);
      }
    }
  }
}

__global__ void dequantize_kernel(const __grid_constant__ Params p) {
  const Blocks& b = p.blocks;
  const uint8_t* codes = static_cast<const uint8_t*>(p.codes.data);
  const uint8_t* scales = static_cast<const uint8_t*>(p.scales.data);
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < b.tasks;
       t += int64_t(gridDim.x) * blockDim.x) {
    const Task task = task_at(p, t);
    if (task.block >= b.blocks) continue;
    const int64_t first = task.block * kMxBlock;
    const int64_t last = min(first + kMxBlock, b.length);
    for (int64_t w = task.column_begin; w < task.column_end; ++w) {
      const float scale =
          mx::decode_scale(scales[task.scales + task.block * p.scales.stride[b.axis] +
                                  w * inner_stride(p, p.scales)]);
      for (int64_t k = first; k < last; ++k) {
        const uint8_t code =
            mx::load_code(p.codes.type, codes,
                          task.codes + k * p.codes.stride[b.axis] + w * inner_stride(p, p.codes));
        mx::store_plain(
            p.logical.data, p.logical.type,
            task.logical + k * p.logical.stride[b.axis] + w * inner_stride(p, p.logical),
            mx::decode(p.codes.type, code) * scale);
      }
    }
  }
}

constexpr int kThreads = 256;

Status launch_blocks(const void* kernel, Params& p, void* stream, const char* what) {
  if (p.blocks.tasks == 0) return Status::ok();
  int device = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return detail::cuda_failure(what, e);
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess) {
    return detail::cuda_failure(what, e);
  }
  // Enough CTAs for every task up to 32 waves of the SMs; threads loop over the rest.
  const int64_t ctas =
      std::min<int64_t>((p.blocks.tasks + kThreads - 1) / kThreads, int64_t(sms) * 32);
  detail::KernelRef ref{kernel, 0, false};
  return detail::launch(ref, dim3(unsigned(ctas)), dim3(kThreads), p, stream, false, what);
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

}  // namespace

Status quantize(const TensorView& src, const TensorView& data, const TensorView& scales, int axis,
                ScaleMode mode, void* stream) {
  Params p;
  p.blocks = blocks_of(src, data, scales, axis);
  p.logical = view_of(src);
  p.codes = view_of(data);
  p.scales = view_of(scales);
  p.mode = mode;
  // 32 contiguous values a block, every block start a 16-byte boundary: the block axis is the
  // last, contiguous, and every other axis steps in whole 16-byte units.
  const int64_t elem_bytes = bits_of(src.dtype) / 8;
  bool vectors = axis == src.rank - 1 && src.stride[axis] == 1 && aligned16(src.data);
  for (int i = 0; i + 1 < src.rank && vectors; ++i) {
    vectors = src.shape[i] == 1 || (src.stride[i] * elem_bytes) % 16 == 0;
  }
  p.vector_loads = vectors;
  return launch_blocks(reinterpret_cast<const void*>(&quantize_kernel), p, stream,
                       "quantize kernel launch");
}

Status dequantize(const TensorView& data, const TensorView& scales, int axis, const TensorView& dst,
                  void* stream) {
  Params p;
  p.blocks = blocks_of(dst, data, scales, axis);
  p.logical = view_of(dst);
  p.codes = view_of(data);
  p.scales = view_of(scales);
  return launch_blocks(reinterpret_cast<const void*>(&dequantize_kernel), p, stream,
                       "dequantize kernel launch");
}

}  // namespace mxattn::cuda::quant
