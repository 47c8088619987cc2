// Reading one head-dim row of Q, K or V as f32, whatever its storage: f32/f16/bf16, or MX codes
// with their E8M0 scales (exact), dense or paged. Shared by the CPU engines.
#pragma once

#include <cstdint>

#include "base/float16.h"
#include "core/problem.h"
#include "mx/formats.h"

namespace mxattn::cpu {

// Element `e` of row data at element offset `off` of view `v` (plain float types).
inline float load_plain(const TensorView& v, int64_t off) {
  switch (v.dtype) {
    case DType::f16:
      return base::f16_to_float(static_cast<const uint16_t*>(v.data)[off]);
    case DType::bf16:
      return base::bf16_to_float(static_cast<const uint16_t*>(v.data)[off]);
    default:
      return static_cast<const float*>(v.data)[off];
  }
}

// Copies n elements starting at element offset `off` (stride `step`) of a plain or MX view into
// out. For MX, `scale_of(d)` gives the E8M0 byte of element d.
template <class ScaleOf>
inline void load_row(const TensorView& v, int64_t off, int64_t step, int64_t n, ScaleOf scale_of,
                     float* out) {
  if (!is_mx(v.dtype)) {
    for (int64_t d = 0; d < n; ++d) out[d] = load_plain(v, off + d * step);
    return;
  }
  // Packed rows are contiguous along the head dim (validated), so step is 1 and off is a whole
  // number of packing groups.
  const uint8_t* base = static_cast<const uint8_t*>(v.data) + off * bits_of(v.dtype) / 8;
  for (int64_t d = 0; d < n; ++d) {
    out[d] = mx::decode(v.dtype, mx::load_code(v.dtype, base, d)) * mx::decode_scale(scale_of(d));
  }
}

// Row i of Q for (b, h): dim_qk values.
inline void load_q_row(const core::Problem& p, int64_t b, int64_t i, int64_t h, float* out) {
  const TensorView& q = p.args.q;
  const TensorView& qs = p.args.q_scales;
  load_row(
      q, base::offset_of(q, b, i, h, 0), q.stride[3], p.dim_qk,
      [&](int64_t d) {
        return static_cast<const uint8_t*>(qs.data)[base::offset_of(qs, b, i, h, d / 32)];
      },
      out);
}

// Key j of batch b, KV head hk: dim_qk values (paged caches resolved through the block table).
inline void load_k_row(const core::Problem& p, int64_t b, int64_t j, int64_t hk, float* out) {
  const TensorView& k = p.args.k;
  const TensorView& ks = p.args.k_scales;
  const int64_t page = p.kv_page(b, j), slot = p.kv_slot(j);
  load_row(
      k, base::offset_of(k, page, slot, hk, 0), k.stride[3], p.dim_qk,
      [&](int64_t d) {
        return static_cast<const uint8_t*>(ks.data)[base::offset_of(ks, page, slot, hk, d / 32)];
      },
      out);
}

// Value row j of batch b, KV head hk: dim_v values. V scales run along the head dim or along keys.
inline void load_v_row(const core::Problem& p, int64_t b, int64_t j, int64_t hk, float* out) {
  const TensorView& v = p.args.v;
  const TensorView& vs = p.args.v_scales;
  const int64_t page = p.kv_page(b, j), slot = p.kv_slot(j);
  const bool along_keys = p.args.v_scale_axis == VScaleAxis::keys;
  load_row(
      v, base::offset_of(v, page, slot, hk, 0), v.stride[3], p.dim_v,
      [&](int64_t d) {
        const int64_t off = along_keys ? base::offset_of(vs, page, hk, slot / 32, d)
                                       : base::offset_of(vs, page, slot, hk, d / 32);
        return static_cast<const uint8_t*>(vs.data)[off];
      },
      out);
}

}  // namespace mxattn::cpu
