// Producer-side transforms that leave attention unchanged (spec §5): the normalized Walsh-Hadamard
// rotation of Q and K, and K smoothing.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "base/index.h"
#include "mx/hadamard.h"
#include "mx/quantize.h"
#include "mx/views.h"
#include "mxattn/mx.h"

namespace mxattn {

Status hadamard_rotate(const TensorView& x) {
  if (Status s = mx::check_given("x", x); !s) return s;
  if (x.dtype != DType::f32) {
    return Status::invalid("x must be f32 but is " + std::string(name_of(x.dtype)));
  }
  const int last = x.rank - 1;
  const int64_t n = x.shape[last];
  if (n <= 0 || (n & (n - 1)) != 0) {
    return Status::invalid("x's last dimension must be a power of two but is " + std::to_string(n));
  }
  if (Status s = mx::check_backed("x", x); !s) return s;
  const mx::OuterAxes rows(x, last);
  float* values = static_cast<float*>(x.data);
  const int64_t step = x.stride[last];
#pragma omp parallel
  {
    std::vector<double> row(size_t(n), 0.0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows.combinations(); ++r) {
      float* base = values + rows.offset(x, r);
      for (int64_t i = 0; i < n; ++i) row[size_t(i)] = base[i * step];
      mx::hadamard_row(row.data(), n);
      for (int64_t i = 0; i < n; ++i) base[i * step] = float(row[size_t(i)]);
    }
  }
  return Status::ok();
}

Status smooth_keys(const TensorView& k, const TensorView& kv_len, const TensorView& k_mean) {
  if (Status s = mx::check_given("k", k); !s) return s;
  if (Status s = mx::check_given("k_mean", k_mean); !s) return s;
  if (k.dtype != DType::f32 || k.rank != 4) {
    return Status::invalid("k must be f32 [B, Sk, Hkv, D] but is " + std::string(name_of(k.dtype)) +
                           " " + k.shape_string());
  }
  const int64_t batch = k.shape[0], seq_k = k.shape[1], heads = k.shape[2], dim = k.shape[3];
  if (k_mean.dtype != DType::f32 || k_mean.rank != 3 || k_mean.shape[0] != batch ||
      k_mean.shape[1] != heads || k_mean.shape[2] != dim) {
    return Status::invalid("k_mean must be f32 [" + std::to_string(batch) + ", " +
                           std::to_string(heads) + ", " + std::to_string(dim) + "] but is " +
                           std::string(name_of(k_mean.dtype)) + " " + k_mean.shape_string());
  }
  if (Status s = mx::check_backed("k", k); !s) return s;
  if (Status s = mx::check_backed("k_mean", k_mean); !s) return s;
  if (kv_len.given()) {
    if (kv_len.dtype != DType::i32 || kv_len.rank != 1 || kv_len.shape[0] != batch) {
      return Status::invalid("kv_len must be i32 [" + std::to_string(batch) + "] but is " +
                             std::string(name_of(kv_len.dtype)) + " " + kv_len.shape_string());
    }
    if (Status s = mx::check_backed("kv_len", kv_len); !s) return s;
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t len = base::read_i32(kv_len, base::offset_of(kv_len, b));
      if (len < 0 || len > seq_k) {
        return Status::invalid("kv_len[" + std::to_string(b) + "] = " + std::to_string(len) +
                               " is outside [0, " + std::to_string(seq_k) + "]");
      }
    }
  }
  float* keys = static_cast<float*>(k.data);
  float* means = static_cast<float*>(k_mean.data);
#pragma omp parallel
  {
    std::vector<double> sum(size_t(dim), 0.0);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t valid =
            kv_len.given() ? base::read_i32(kv_len, base::offset_of(kv_len, b)) : seq_k;
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t j = 0; j < valid; ++j) {
          for (int64_t d = 0; d < dim; ++d) sum[size_t(d)] += keys[base::offset_of(k, b, j, h, d)];
        }
        for (int64_t d = 0; d < dim; ++d) {
          // The mean as stored is what an engine adds back, so subtract exactly that value.
          const float mean = valid > 0 ? float(sum[size_t(d)] / double(valid)) : 0.0f;
          means[base::offset_of(k_mean, b, h, d)] = mean;
          for (int64_t j = 0; j < valid; ++j) keys[base::offset_of(k, b, j, h, d)] -= mean;
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace mxattn

namespace mxattn::mx {

Status check_key_transforms(const TensorView& k, const TensorView& data, const TensorView& scales,
                            const KeyTransforms& t, bool lengths_readable) {
  if (Status s = check_given("k", k); !s) return s;
  if (k.rank != 4 || !is_plain_float(k.dtype)) {
    return Status::invalid("k must be f32, f16 or bf16 [B, Sk, Hkv, D] but is " +
                           std::string(name_of(k.dtype)) + " " + k.shape_string());
  }
  if (Status s = check_mx_arguments("k", k, data, scales, 3); !s) return s;
  const int64_t batch = k.shape[0], seq_k = k.shape[1], heads = k.shape[2], dim = k.shape[3];
  if (t.rotate && (dim <= 0 || (dim & (dim - 1)) != 0)) {
    return Status::invalid("rotate: the Hadamard rotation needs D a power of two, found " +
                           std::to_string(dim));
  }
  if (t.k_mean.given()) {
    const TensorView& m = t.k_mean;
    if (m.dtype != DType::f32 || m.rank != 3 || m.shape[0] != batch || m.shape[1] != heads ||
        m.shape[2] != dim) {
      return Status::invalid("k_mean must be f32 [" + std::to_string(batch) + ", " +
                             std::to_string(heads) + ", " + std::to_string(dim) + "] but is " +
                             std::string(name_of(m.dtype)) + " " + m.shape_string());
    }
    if (Status s = check_backed("k_mean", m); !s) return s;
  }
  if (t.kv_len.given()) {
    const TensorView& l = t.kv_len;
    if (l.dtype != DType::i32 || l.rank != 1 || l.shape[0] != batch) {
      return Status::invalid("kv_len must be i32 [" + std::to_string(batch) + "] but is " +
                             std::string(name_of(l.dtype)) + " " + l.shape_string());
    }
    if (Status s = check_backed("kv_len", l); !s) return s;
    for (int64_t b = 0; lengths_readable && b < batch; ++b) {
      const int32_t len = base::read_i32(l, base::offset_of(l, b));
      if (len < 0 || len > seq_k) {
        return Status::invalid("kv_len[" + std::to_string(b) + "] = " + std::to_string(len) +
                               " is outside [0, " + std::to_string(seq_k) + "]");
      }
    }
  }
  return Status::ok();
}

void quantize_keys_on_host(const TensorView& k, const TensorView& data, const TensorView& scales,
                           ScaleMode mode, const KeyTransforms& t) {
  // A contiguous f32 copy is transformed and quantized; K is left as it is.
  base::HostTensor work(DType::f32, {k.shape[0], k.shape[1], k.shape[2], k.shape[3]});
  const OuterAxes rows(k, 3);
  float* out = work.data<float>();
  const int64_t dim = k.shape[3];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows.combinations(); ++r) {
    const int64_t at = rows.offset(k, r);
    for (int64_t d = 0; d < dim; ++d) out[r * dim + d] = base::load_float(k, at + d * k.stride[3]);
  }
  if (t.rotate) (void)hadamard_rotate(work.view());
  if (t.k_mean.given()) (void)smooth_keys(work.view(), t.kv_len, t.k_mean);
  quantize_on_host(work.view(), data, scales, 3, mode);
}

}  // namespace mxattn::mx
