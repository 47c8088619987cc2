// How fast the MX quantizer and dequantizer (mxattn::quantize, mxattn::dequantize) turn a KV
// cache's worth of values into MX codes and back: bytes of f32 source per second for each element
// format, both block axes (Google Benchmark). A table on stdout; JSON with
//   mxattn_bench_mx --benchmark_out=mx.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_util.h"
#include "mxattn/mx.h"

namespace {

using mxattn::DType;
using mxattn::bench::HostTensor;

constexpr int64_t kTokens = 4096, kHeads = 8, kDim = 128;

HostTensor random_keys() {
  HostTensor x(DType::f32, {1, kTokens, kHeads, kDim});
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < x.numel(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x.data<float>()[i] = float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(1 << 21);
  }
  return x;
}

// Block axis 3 (head dim, K/Q layout) or 1 (keys, V's along-keys layout).
void BM_Quantize(benchmark::State& state, DType format, int axis) {
  const HostTensor x = random_keys();
  HostTensor data(format, {1, kTokens, kHeads, kDim});
  HostTensor scales = axis == 3 ? HostTensor(DType::e8m0, {1, kTokens, kHeads, kDim / 32})
                                : HostTensor(DType::e8m0, {1, kTokens / 32, kHeads, kDim});
  for (auto _ : state) {
    if (!mxattn::quantize(x.view(), data.view(), scales.view(), axis, mxattn::ScaleMode::floor)) {
      state.SkipWithError("quantize failed");
      break;
    }
    benchmark::DoNotOptimize(data.view().data);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * x.bytes());
}

void BM_Dequantize(benchmark::State& state, DType format) {
  const HostTensor x = random_keys();
  HostTensor data(format, {1, kTokens, kHeads, kDim});
  HostTensor scales(DType::e8m0, {1, kTokens, kHeads, kDim / 32});
  HostTensor back(DType::f32, {1, kTokens, kHeads, kDim});
  if (!mxattn::quantize(x.view(), data.view(), scales.view(), 3, mxattn::ScaleMode::floor)) {
    state.SkipWithError("quantize failed");
    return;
  }
  for (auto _ : state) {
    if (!mxattn::dequantize(data.view(), scales.view(), 3, back.view())) {
      state.SkipWithError("dequantize failed");
      break;
    }
    benchmark::DoNotOptimize(back.view().data);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * back.bytes());
}

#define MX_FORMATS(X) X(e4m3) X(e5m2) X(e2m3) X(e3m2) X(e2m1)
#define REGISTER(f)                                                                         \
  BENCHMARK_CAPTURE(BM_Quantize, f##_head_dim, DType::f, 3)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_Quantize, f##_keys, DType::f, 1)->Unit(benchmark::kMillisecond);     \
  BENCHMARK_CAPTURE(BM_Dequantize, f, DType::f)->Unit(benchmark::kMillisecond);
MX_FORMATS(REGISTER)

}  // namespace

BENCHMARK_MAIN();
