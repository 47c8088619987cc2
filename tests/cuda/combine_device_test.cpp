// mxattn::combine and merge_states on device tensors against the host (spec §3): the same merge
// algebra in the same split order; the GPU's expf may differ from the host's by an ulp or two, so
// outputs agree to 2e-6 of their scale and empty rows exactly. Counts the GPU reads are clamped to
// [0, S].
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/host_tensor.h"
#include "cuda/device_buffers.h"
#include "mx/kv_rows.h"
#include "mxattn/combine.h"

namespace mxattn::test {
namespace {

using base::HostTensor;

std::vector<uint8_t> bytes_of(const HostTensor& t) {
  const uint8_t* p = t.data<uint8_t>();
  return std::vector<uint8_t>(p, p + t.bytes());
}

void expect_close(const HostTensor& want, const std::vector<uint8_t>& got, double tolerance) {
  for (int64_t e = 0; e < want.numel(); ++e) {
    const float w = base::load_float(want.view(), e);
    const float g = mx::load_plain(got.data(), want.view().dtype, e);
    if (std::isinf(w) || w == 0.0f) {
      ASSERT_EQ(w, g) << "element " << e;
    } else {
      ASSERT_NEAR(g, w, tolerance * (1.0 + std::fabs(w))) << "element " << e;
    }
  }
}

TEST(CudaCombine, EqualsTheHostCombine) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const DType part_type : {DType::f32, DType::bf16}) {
    for (const DType out_type : {DType::f32, DType::f16}) {
      const int64_t slots = 6, batch = 2, seq = 5, heads = 3, dim = 80;
      HostTensor po(part_type, {slots, batch, seq, heads, dim});
      HostTensor pl(DType::f32, {slots, batch, heads, seq}),
          counts(DType::i32, {batch, heads, seq});
      HostTensor o(out_type, {batch, seq, heads, dim}), lse(DType::f32, {batch, heads, seq});
      for (int64_t e = 0; e < po.numel(); ++e) base::store_float(po.view(), e, normal(rng));
      for (int64_t e = 0; e < pl.numel(); ++e)
        pl.data<float>()[e] = e % 11 ? normal(rng) : -INFINITY;
      for (int64_t e = 0; e < counts.numel(); ++e)
        counts.data<int32_t>()[e] = int32_t(e % (slots + 1));
      DeviceBytes d_po(bytes_of(po)), d_pl(bytes_of(pl)), d_counts(bytes_of(counts));
      DeviceBytes d_o(bytes_of(o)), d_lse(bytes_of(lse));
      ASSERT_TRUE(combine({po.view(), pl.view(), counts.view(), o.view(), lse.view()}).is_ok());
      const Status st = combine({on_device(po.view(), d_po), on_device(pl.view(), d_pl),
                                 on_device(counts.view(), d_counts), on_device(o.view(), d_o),
                                 on_device(lse.view(), d_lse)});
      ASSERT_TRUE(st.is_ok()) << st.message();
      check(cudaDeviceSynchronize(), "combine");
      expect_close(o, d_o.download(), out_type == DType::f16 ? 1e-3 : 2e-6);
      expect_close(lse, d_lse.download(), 2e-6);

      // Counts past [0, S] on the device are clamped, never read past the partials.
      counts.data<int32_t>()[0] = int32_t(slots + 5);
      counts.data<int32_t>()[1] = -3;
      d_counts.upload(bytes_of(counts));
      counts.data<int32_t>()[0] = int32_t(slots);
      counts.data<int32_t>()[1] = 0;
      ASSERT_TRUE(combine({po.view(), pl.view(), counts.view(), o.view(), lse.view()}).is_ok());
      ASSERT_TRUE(combine({on_device(po.view(), d_po), on_device(pl.view(), d_pl),
                           on_device(counts.view(), d_counts), on_device(o.view(), d_o),
                           on_device(lse.view(), d_lse)})
                      .is_ok());
      check(cudaDeviceSynchronize(), "combine");
      expect_close(o, d_o.download(), out_type == DType::f16 ? 1e-3 : 2e-6);
    }
  }
}

TEST(CudaMergeStates, EqualsTheHostMergeAndRunsInPlace) {
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t rows = 300, heads = 4, dim = 128;
  HostTensor o_a(DType::bf16, {rows, heads, dim}), o_b(DType::bf16, {rows, heads, dim});
  HostTensor lse_a(DType::f32, {rows, heads}), lse_b(DType::f32, {rows, heads});
  for (int64_t e = 0; e < o_a.numel(); ++e) {
    base::store_float(o_a.view(), e, normal(rng));
    base::store_float(o_b.view(), e, normal(rng));
  }
  for (int64_t e = 0; e < rows * heads; ++e) {
    lse_a.data<float>()[e] = e % 9 ? normal(rng) : -INFINITY;
    lse_b.data<float>()[e] = e % 4 ? normal(rng) : -INFINITY;
  }
  DeviceBytes d_oa(bytes_of(o_a)), d_ob(bytes_of(o_b)), d_la(bytes_of(lse_a)),
      d_lb(bytes_of(lse_b));
  HostTensor o(DType::bf16, {rows, heads, dim}), lse(DType::f32, {rows, heads});
  ASSERT_TRUE(
      merge_states({o_a.view(), lse_a.view(), o_b.view(), lse_b.view(), o.view(), lse.view()})
          .is_ok());
  // On the GPU in place: the merged state overwrites the first.
  const Status st = merge_states({on_device(o_a.view(), d_oa), on_device(lse_a.view(), d_la),
                                  on_device(o_b.view(), d_ob), on_device(lse_b.view(), d_lb),
                                  on_device(o_a.view(), d_oa), on_device(lse_a.view(), d_la)});
  ASSERT_TRUE(st.is_ok()) << st.message();
  check(cudaDeviceSynchronize(), "merge");
  expect_close(o, d_oa.download(), 1e-2);  // bf16 outputs: a rounding apart at most
  expect_close(lse, d_la.download(), 2e-6);
}

}  // namespace
}  // namespace mxattn::test
