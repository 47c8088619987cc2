// Views of wgmma register fragments. The f32 accumulator of an m64nNk16 wgmma holds, per thread,
// values ((column pair, row half, column group of 8), M tiles, N tiles); the mask, the softmax and
// the epilogue want it as (rows, columns), and P = softmax(S) feeds the P V product as the A
// operand of a register-sourced wgmma, whose k16 slices are two consecutive column groups.
#pragma once

#include <cutlass/numeric_conversion.h>
#include <cute/tensor.hpp>

namespace mxattn::cuda::prefill {

using namespace cute;

// ((2, 2, N/8), M, N') -> ((2, M), (2, N/8, N')): rows first, then columns.
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto rows_cols(AccLayout acc) {
  static_assert(rank(get<0>(AccLayout{})) == 3);
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}

template <class Tensor>
CUTE_HOST_DEVICE auto rows_cols_view(Tensor&& t) {
  return make_tensor(t.data(), rows_cols(t.layout()));
}

// ((2, 2, N/8), M, 1) -> ((2, 2, 2), M, N/16): the accumulator of S read as the A operand of P V.
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto acc_as_a_operand(AccLayout acc) {
  static_assert(size<0, 2>(AccLayout{}) % 2 == 0);
  const auto split = logical_divide(get<0>(acc), Shape<Underscore, Underscore, _2>{});
  return make_layout(make_layout(get<0>(split), get<1>(split), get<2, 0>(split)), get<1>(acc),
                     make_layout(get<2, 1>(split), get<2>(acc)));
}

// Rounds f32 fragment values to the 16-bit element type, two at a time (one cvt per pair).
template <class Element, class Src, class Dst>
__device__ __forceinline__ void round_pairs(const Src& src, Dst& dst) {
  static_assert(size(Src{}) % 2 == 0);
  using Converter =
      cutlass::NumericArrayConverter<Element, float, 2, cutlass::FloatRoundStyle::round_to_nearest>;
  auto* in = reinterpret_cast<const cutlass::Array<float, 2>*>(src.data());
  auto* out = reinterpret_cast<cutlass::Array<Element, 2>*>(dst.data());
#pragma unroll
  for (int i = 0; i < size(src) / 2; ++i) out[i] = Converter::convert(in[i]);
}

}  // namespace mxattn::cuda::prefill
