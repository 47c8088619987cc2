// Runs one small attention problem through the installed library and checks O against a direct
// computation: the installed headers and library are complete and usable on their own.
#include <mxattn/attention.h>
#include <mxattn/build_info.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  constexpr int64_t kKeys = 5, kDim = 32;
  std::vector<float> q(kDim), k(kKeys * kDim), v(kKeys * kDim), o(kDim, NAN);
  for (int64_t i = 0; i < kKeys * kDim; ++i) {
    k[size_t(i)] = std::sin(0.37f * float(i));
    v[size_t(i)] = std::cos(0.11f * float(i));
  }
  for (int64_t d = 0; d < kDim; ++d) q[size_t(d)] = 0.1f * float(d % 7);
  mxattn::AttentionArgs a;
  a.q = mxattn::make_view(q.data(), mxattn::DType::f32, {1, 1, 1, kDim});
  a.k = mxattn::make_view(k.data(), mxattn::DType::f32, {1, kKeys, 1, kDim});
  a.v = mxattn::make_view(v.data(), mxattn::DType::f32, {1, kKeys, 1, kDim});
  a.o = mxattn::make_view(o.data(), mxattn::DType::f32, {1, 1, 1, kDim});
  if (const mxattn::Status st = mxattn::attention(a); !st) {
    std::printf("attention failed: %s\n", st.message().c_str());
    return 1;
  }
  double w[kKeys], sum = 0, worst = 0;
  for (int64_t j = 0; j < kKeys; ++j) {
    double s = 0;
    for (int64_t d = 0; d < kDim; ++d) s += double(q[size_t(d)]) * k[size_t(j * kDim + d)];
    w[j] = std::exp(s / std::sqrt(double(kDim)));
    sum += w[j];
  }
  for (int64_t d = 0; d < kDim; ++d) {
    double want = 0;
    for (int64_t j = 0; j < kKeys; ++j) want += w[j] / sum * v[size_t(j * kDim + d)];
    worst = std::fmax(worst, std::fabs(want - o[size_t(d)]));
  }
  std::printf("mxattn %s from an installed package: max error %.2e\n",
              mxattn::build_info().version.c_str(), worst);
  return worst < 1e-5 ? 0 : 1;
}
