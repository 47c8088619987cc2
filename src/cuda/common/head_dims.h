// The head dims the CUDA engines have kernels for, in one table: the decode and prefill instance
// dispatch, the prefill tiles and every "supports (Dqk, Dv) = ..." message derive from it. A pair
// added here without instances fails to link, so the instance lists cannot drift from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace mxattn::cuda {

struct HeadDims {
  int qk;
  int v;
};

inline constexpr HeadDims kHeadDims[] = {{64, 64}, {128, 128}, {256, 256}, {192, 128}};
inline constexpr size_t kHeadDimPairs = sizeof(kHeadDims) / sizeof(kHeadDims[0]);

constexpr bool has_head_dims(int64_t dim_qk, int64_t dim_v) {
  for (const HeadDims& d : kHeadDims)
    if (d.qk == dim_qk && d.v == dim_v) return true;
  return false;
}

// "(64, 64), (128, 128), (256, 256) or (192, 128)", for messages.
inline std::string head_dims_text() {
  std::string s;
  for (size_t i = 0; i < kHeadDimPairs; ++i) {
    if (i > 0) s += i + 1 == kHeadDimPairs ? " or " : ", ";
    s += '(';
    s += std::to_string(kHeadDims[i].qk);
    s += ", ";
    s += std::to_string(kHeadDims[i].v);
    s += ')';
  }
  return s;
}

namespace detail {
template <class R, class F, size_t... I>
R dispatch_head_dims(int64_t dim_qk, int64_t dim_v, F&& f, std::index_sequence<I...>) {
  R r{};
  (void)((kHeadDims[I].qk == dim_qk && kHeadDims[I].v == dim_v
              ? (r = f.template operator()<kHeadDims[I].qk, kHeadDims[I].v>(), true)
              : false) ||
         ...);
  return r;
}
}  // namespace detail

// f.template operator()<Dqk, Dv>() for the table's pair equal to (dim_qk, dim_v); R{} for a pair
// the table does not hold.
template <class R, class F>
R for_head_dims(int64_t dim_qk, int64_t dim_v, F&& f) {
  return detail::dispatch_head_dims<R>(dim_qk, dim_v, f, std::make_index_sequence<kHeadDimPairs>{});
}

// The prefill kernel's tiles (spec §3's tile_m and tile_n of its partition) for a head-dim pair:
// 128 query rows (two math warpgroups of 64), and the largest key tile whose two K/V stages, Q and
// the barriers fit in 227 KB of shared memory (Dqk 256: 64 KB of Q plus 2 x 2 x 40 KB of K and V).
inline constexpr int kPrefillTileM = 128;
constexpr int prefill_key_tile(int dim_qk) {
  return dim_qk <= 192 ? 128 : 80;
}

}  // namespace mxattn::cuda
