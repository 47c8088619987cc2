// Whole-tensor MX quantization and dequantization (spec §5), block by block through mx/formats.h.
#include <algorithm>
#include <string>
#include <utility>

#include "base/host_tensor.h"
#include "mx/formats.h"
#include "mx/quantize.h"
#include "mx/views.h"
#include "mxattn/mx.h"

namespace mxattn {
namespace {

// Columns of the inner axis handled by one task: a multiple of every packing group, so tasks of a
// packed tensor never share a byte.
constexpr int64_t kColumnsPerTask = 256;

// The blocks of a logical shape along `axis`, cut into independent tasks. A task is one block of 32
// positions along `axis` times a chunk of columns of the last axis (when the last axis is not the
// block axis), at one combination of the remaining "outer" axes.
struct BlockTasks {
  BlockTasks(const TensorView& logical, int block_axis)
      : axis(block_axis),
        inner_axis(block_axis == logical.rank - 1 ? -1 : logical.rank - 1),
        length(logical.shape[block_axis]),
        blocks((length + kMxBlock - 1) / kMxBlock),
        inner_length(inner_axis < 0 ? 1 : logical.shape[inner_axis]),
        chunks((inner_length + kColumnsPerTask - 1) / kColumnsPerTask),
        outer(logical, block_axis, inner_axis) {}

  int64_t count() const { return outer.combinations() * blocks * chunks; }
  int64_t inner_stride(const TensorView& v) const {
    return inner_axis < 0 ? 0 : v.stride[inner_axis];
  }

  int axis;
  int inner_axis;  // -1 when the block axis is the last axis
  int64_t length;  // logical positions along the block axis
  int64_t blocks;
  int64_t inner_length;
  int64_t chunks;
  mx::OuterAxes outer;
};

// Where task `t` lies: its combination of the outer axes, its block and its columns.
struct Task {
  int64_t outer_index;
  int64_t block;
  int64_t column_begin;
  int64_t column_end;
  int64_t first;  // positions [first, last) along the block axis
  int64_t last;
};

Task task_at(const BlockTasks& tasks, int64_t t) {
  Task task;
  const int64_t per_outer = tasks.blocks * tasks.chunks;
  task.outer_index = t / per_outer;
  task.block = (t % per_outer) / tasks.chunks;
  const int64_t chunk = t % tasks.chunks;
  task.column_begin = chunk * kColumnsPerTask;
  task.column_end = std::min(tasks.inner_length, task.column_begin + kColumnsPerTask);
  task.first = task.block * kMxBlock;
  task.last = std::min(tasks.length, task.first + kMxBlock);
  return task;
}

Status check_same_rank(const char* name, const TensorView& v, const TensorView& logical) {
  if (v.rank != logical.rank) {
    return Status::invalid(std::string(name) + " has rank " + std::to_string(v.rank) +
                           " but the tensor has rank " + std::to_string(logical.rank));
  }
  return Status::ok();
}

// `v` has the logical shape with axis `axis` replaced by at least `min_along_axis`.
Status check_blocked_shape(const char* name, const TensorView& v, const TensorView& logical,
                           int axis, int64_t min_along_axis) {
  TensorView expected = logical;
  expected.shape[axis] = min_along_axis;
  for (int i = 0; i < logical.rank; ++i) {
    const bool ok = i == axis ? v.shape[i] >= min_along_axis : v.shape[i] == logical.shape[i];
    if (!ok) {
      return Status::invalid(std::string(name) + " must have shape " + expected.shape_string() +
                             " (longer along axis " + std::to_string(axis) + " allowed) but has " +
                             v.shape_string());
    }
  }
  return Status::ok();
}

}  // namespace

namespace mx {

Status check_mx_arguments(const char* logical_name, const TensorView& logical,
                          const TensorView& data, const TensorView& scales, int axis) {
  const std::pair<const char*, const TensorView*> views[] = {
      {logical_name, &logical}, {"data", &data}, {"scales", &scales}};
  for (auto [name, view] : views) {
    if (Status s = mx::check_given(name, *view); !s) return s;
  }
  if (!is_plain_float(logical.dtype)) {
    return Status::invalid(std::string(logical_name) + " must be f32, f16 or bf16 but is " +
                           std::string(name_of(logical.dtype)));
  }
  if (!is_mx(data.dtype)) {
    return Status::invalid(
        "data must be an MX element type (e4m3, e5m2, e2m3, e3m2, e2m1) but is " +
        std::string(name_of(data.dtype)));
  }
  if (scales.dtype != DType::e8m0) {
    return Status::invalid("scales must be e8m0 but are " + std::string(name_of(scales.dtype)));
  }
  if (axis < 0 || axis >= logical.rank) {
    return Status::invalid("axis " + std::to_string(axis) + " is outside [0, " +
                           std::to_string(logical.rank) + ")");
  }
  if (Status s = check_same_rank("data", data, logical); !s) return s;
  if (Status s = check_same_rank("scales", scales, logical); !s) return s;
  const int64_t blocks = (logical.shape[axis] + kMxBlock - 1) / kMxBlock;
  if (Status s = check_blocked_shape("data", data, logical, axis, logical.shape[axis]); !s)
    return s;
  if (Status s = check_blocked_shape("scales", scales, logical, axis, blocks); !s) return s;
  for (auto [name, view] : views) {
    if (Status s = mx::check_backed(name, *view); !s) return s;
  }
  return Status::ok();
}

}  // namespace mx

namespace {

// Zero-fills what lies past the logical extent along `axis`: codes 0 in data, byte 0 in scales. It
// runs after the blocks, one task per outer combination, because a packed row's padding can share a
// byte with its last block.
void zero_padding(const BlockTasks& tasks, const TensorView& data, const TensorView& scales) {
  uint8_t* codes = static_cast<uint8_t*>(data.data);
  uint8_t* scale_bytes = static_cast<uint8_t*>(scales.data);
  const int64_t data_length = data.shape[tasks.axis];
  const int64_t scale_length = scales.shape[tasks.axis];
  if (data_length == tasks.length && scale_length == tasks.blocks) return;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < tasks.outer.combinations(); ++o) {
    const int64_t data_base = tasks.outer.offset(data, o);
    const int64_t scale_base = tasks.outer.offset(scales, o);
    for (int64_t w = 0; w < tasks.inner_length; ++w) {
      for (int64_t k = tasks.length; k < data_length; ++k) {
        mx::store_code(data.dtype, codes,
                       data_base + k * data.stride[tasks.axis] + w * tasks.inner_stride(data), 0);
      }
      for (int64_t b = tasks.blocks; b < scale_length; ++b) {
        scale_bytes[scale_base + b * scales.stride[tasks.axis] + w * tasks.inner_stride(scales)] =
            0;
      }
    }
  }
}

}  // namespace

namespace mx {

void quantize_on_host(const TensorView& src, const TensorView& data, const TensorView& scales,
                      int axis, ScaleMode mode) {
  const BlockTasks tasks(src, axis);
  uint8_t* codes = static_cast<uint8_t*>(data.data);
  uint8_t* scale_bytes = static_cast<uint8_t*>(scales.data);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks.count(); ++t) {
    const Task task = task_at(tasks, t);
    const int64_t src_base = tasks.outer.offset(src, task.outer_index);
    const int64_t data_base = tasks.outer.offset(data, task.outer_index);
    const int64_t scale_base =
        tasks.outer.offset(scales, task.outer_index) + task.block * scales.stride[axis];
    const int count = int(task.last - task.first);
    for (int64_t w = task.column_begin; w < task.column_end; ++w) {
      float values[kMxBlock];
      uint8_t block_codes[kMxBlock];
      for (int i = 0; i < count; ++i) {
        values[i] = base::load_float(
            src, src_base + (task.first + i) * src.stride[axis] + w * tasks.inner_stride(src));
      }
      scale_bytes[scale_base + w * tasks.inner_stride(scales)] =
          mx::quantize_block(data.dtype, values, count, mode, block_codes);
      for (int i = 0; i < count; ++i) {
        mx::store_code(
            data.dtype, codes,
            data_base + (task.first + i) * data.stride[axis] + w * tasks.inner_stride(data),
            block_codes[i]);
      }
    }
  }
  zero_padding(tasks, data, scales);
}

void dequantize_on_host(const TensorView& data, const TensorView& scales, int axis,
                        const TensorView& dst) {
  const BlockTasks tasks(dst, axis);
  const uint8_t* codes = static_cast<const uint8_t*>(data.data);
  const uint8_t* scale_bytes = static_cast<const uint8_t*>(scales.data);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks.count(); ++t) {
    const Task task = task_at(tasks, t);
    const int64_t dst_base = tasks.outer.offset(dst, task.outer_index);
    const int64_t data_base = tasks.outer.offset(data, task.outer_index);
    const int64_t scale_base =
        tasks.outer.offset(scales, task.outer_index) + task.block * scales.stride[axis];
    for (int64_t w = task.column_begin; w < task.column_end; ++w) {
      const float scale =
          mx::decode_scale(scale_bytes[scale_base + w * tasks.inner_stride(scales)]);
      for (int64_t k = task.first; k < task.last; ++k) {
        const uint8_t code = mx::load_code(
            data.dtype, codes, data_base + k * data.stride[axis] + w * tasks.inner_stride(data));
        base::store_float(dst, dst_base + k * dst.stride[axis] + w * tasks.inner_stride(dst),
                          mx::decode(data.dtype, code) * scale);
      }
    }
  }
}

}  // namespace mx
}  // namespace mxattn
