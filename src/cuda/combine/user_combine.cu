// mxattn::combine and merge_states on device tensors (spec §3): one warp per output row. Every
// lane takes the row's split weights in split order through the merge algebra of core/combine.h
// (the host's order), then the lanes share the row's head dim. Partials of any plain type; counts
// the run reads are clamped to [0, S], so no count reaches outside the partials.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/combine.h"
#include "cuda/combine/combine.h"
#include "mx/kv_rows.h"

namespace mxattn::cuda::detail {
namespace {

struct UserCombineParams {
  const void* part_o = nullptr;
  DType part_o_type = DType::f32;
  int64_t part_o_stride[5] = {};  // [S, B, Sq, Hq, Dv]
  const float* part_lse = nullptr;
  int64_t part_lse_stride[4] = {};  // [S, B, Hq, Sq]
  const int32_t* counts = nullptr;
  int64_t counts_stride[3] = {};  // [B, Hq, Sq]
  void* o = nullptr;
  DType o_type = DType::f32;
  int64_t o_stride[4] = {};  // [B, Sq, Hq, Dv]
  float* lse = nullptr;
  int64_t lse_stride[3] = {};  // [B, Hq, Sq]
  int64_t slots = 0, batch = 0, seq_q = 0, heads = 0, dim = 0;
};

// Two states as two splits: o_a / o_b [N, H, D], lse [N, H].
struct MergeParams {
  const void* o_in[2] = {};
  DType o_in_type[2] = {};
  int64_t o_in_stride[2][3] = {};
  const float* lse_in[2] = {};
  int64_t lse_in_stride[2][2] = {};
  void* o = nullptr;
  DType o_type = DType::f32;
  int64_t o_stride[3] = {};
  float* lse = nullptr;
  int64_t lse_stride[2] = {};
  int64_t rows = 0, heads = 0, dim = 0;
};

constexpr int kRowsPerCta = 4;

// One row's merge over `count` splits: lse(s) gives L_s, value(s, d) the partial O_s[d]; the
// result goes to store(d, x) and store_lse(x).
template <class Lse, class Value, class Store>
__device__ float merge_row(int64_t count, int64_t dim, int lane, Lse lse, Value value,
                           Store store) {
  core::MergeScale st;
  for (int64_t s = 0; s < count; ++s) st.m = core::merge_max(st.m, lse(s));
  for (int64_t s = 0; s < count; ++s) st.sum += core::merge_weight(lse(s), st.m);
  const float divisor = core::merge_divisor(st.sum);
  for (int64_t d = lane; d < dim; d += 32) {
    float acc = 0.0f;
    for (int64_t s = 0; s < count; ++s) {
      acc = __fadd_rn(acc, __fmul_rn(core::merge_weight(lse(s), st.m), value(s, d)));
    }
    store(d, acc / divisor);
  }
  return core::merge_lse(st.m, st.sum);
}

__global__ void __launch_bounds__(kRowsPerCta * 32)
    user_combine_kernel(const __grid_constant__ UserCombineParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerCta + (threadIdx.x >> 5);
  if (row >= p.batch * p.seq_q * p.heads) return;
  const int64_t h = row % p.heads, i = (row / p.heads) % p.seq_q, b = row / (p.heads * p.seq_q);
  const int64_t count = min(
      p.slots,
      max(int64_t(0),
          int64_t(
              p.counts[b * p.counts_stride[0] + h * p.counts_stride[1] + i * p.counts_stride[2]])));
  const int64_t lse_at =
      b * p.part_lse_stride[1] + h * p.part_lse_stride[2] + i * p.part_lse_stride[3];
  const int64_t o_at = b * p.part_o_stride[1] + i * p.part_o_stride[2] + h * p.part_o_stride[3];
  const int64_t out_at = b * p.o_stride[0] + i * p.o_stride[1] + h * p.o_stride[2];
  const float lse = merge_row(
      count, p.dim, lane, [&](int64_t s) { return p.part_lse[lse_at + s * p.part_lse_stride[0]]; },
      [&](int64_t s, int64_t d) {
        return mx::load_plain(p.part_o, p.part_o_type,
                              o_at + s * p.part_o_stride[0] + d * p.part_o_stride[4]);
      },
      [&](int64_t d, float x) { mx::store_plain(p.o, p.o_type, out_at + d * p.o_stride[3], x); });
  if (lane == 0 && p.lse != nullptr) {
    p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] = lse;
  }
}

__global__ void __launch_bounds__(kRowsPerCta * 32)
    merge_kernel(const __grid_constant__ MergeParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerCta + (threadIdx.x >> 5);
  if (row >= p.rows * p.heads) return;
  const int64_t n = row / p.heads, h = row % p.heads;
  // Both inputs are read before the row is written: o and lse may be the inputs themselves.
  const float in_lse[2] = {p.lse_in[0][n * p.lse_in_stride[0][0] + h * p.lse_in_stride[0][1]],
                           p.lse_in[1][n * p.lse_in_stride[1][0] + h * p.lse_in_stride[1][1]]};
  __syncwarp();
  const float lse = merge_row(
      2, p.dim, lane, [&](int64_t s) { return in_lse[s]; },
      [&](int64_t s, int64_t d) {
        return mx::load_plain(
            p.o_in[s], p.o_in_type[s],
            n * p.o_in_stride[s][0] + h * p.o_in_stride[s][1] + d * p.o_in_stride[s][2]);
      },
      [&](int64_t d, float x) {
        mx::store_plain(p.o, p.o_type, n * p.o_stride[0] + h * p.o_stride[1] + d * p.o_stride[2],
                        x);
      });
  __syncwarp();
  if (lane == 0 && p.lse != nullptr) p.lse[n * p.lse_stride[0] + h * p.lse_stride[1]] = lse;
}

template <int N>
void strides_of(const TensorView& v, int64_t (&out)[N]) {
  for (int i = 0; i < N; ++i) out[i] = v.stride[i];
}

template <class Params>
Status launch_rows(const void* kernel, Params& p, int64_t rows, void* stream, const char* what) {
  if (rows == 0) return Status::ok();
  KernelRef ref{kernel, 0, false};
  return launch(ref, dim3(unsigned((rows + kRowsPerCta - 1) / kRowsPerCta)), dim3(kRowsPerCta * 32),
                p, stream, false, what);
}

}  // namespace

Status combine_on_device(const CombineArgs& a, void* stream) {
  UserCombineParams p;
  p.part_o = a.partial_o.data;
  p.part_o_type = a.partial_o.dtype;
  strides_of(a.partial_o, p.part_o_stride);
  p.part_lse = static_cast<const float*>(a.partial_lse.data);
  strides_of(a.partial_lse, p.part_lse_stride);
  p.counts = static_cast<const int32_t*>(a.counts.data);
  strides_of(a.counts, p.counts_stride);
  p.o = a.o.data;
  p.o_type = a.o.dtype;
  strides_of(a.o, p.o_stride);
  if (a.lse.given()) {
    p.lse = static_cast<float*>(a.lse.data);
    strides_of(a.lse, p.lse_stride);
  }
  p.slots = a.partial_o.shape[0];
  p.batch = a.partial_o.shape[1];
  p.seq_q = a.partial_o.shape[2];
  p.heads = a.partial_o.shape[3];
  p.dim = a.partial_o.shape[4];
  return launch_rows(reinterpret_cast<const void*>(&user_combine_kernel), p,
                     p.batch * p.seq_q * p.heads, stream, "combine kernel launch");
}

Status merge_on_device(const MergeArgs& a, void* stream) {
  MergeParams p;
  const TensorView* o_in[2] = {&a.o_a, &a.o_b};
  const TensorView* lse_in[2] = {&a.lse_a, &a.lse_b};
  for (int s = 0; s < 2; ++s) {
    p.o_in[s] = o_in[s]->data;
    p.o_in_type[s] = o_in[s]->dtype;
    strides_of(*o_in[s], p.o_in_stride[s]);
    p.lse_in[s] = static_cast<const float*>(lse_in[s]->data);
    strides_of(*lse_in[s], p.lse_in_stride[s]);
  }
  p.o = a.o.data;
  p.o_type = a.o.dtype;
  strides_of(a.o, p.o_stride);
  if (a.lse.given()) {
    p.lse = static_cast<float*>(a.lse.data);
    strides_of(a.lse, p.lse_stride);
  }
  p.rows = a.o_a.shape[0];
  p.heads = a.o_a.shape[1];
  p.dim = a.o_a.shape[2];
  return launch_rows(reinterpret_cast<const void*>(&merge_kernel), p, p.rows * p.heads, stream,
                     "merge kernel launch");
}

}  // namespace mxattn::cuda::detail
