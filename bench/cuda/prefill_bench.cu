// Prefill benchmark of the CUDA engine: B = 4, H = 32, S = 4096, bf16 Q/K/V and O, head dims 64,
// 128 and 256, causal (top-left) and not, timed with CUDA events (median of repeated launches after
// a warm-up). Prints a table and writes JSON; bench/cuda/torch_sdpa_prefill.py measures PyTorch
// SDPA's cuDNN and flash backends and the bf16 matrix rate in the same call and joins them.
//
// FLOPs counted as FlashAttention does: 4 * B * H * Sq * Sk * D (two GEMMs), halved when causal.
// Each tensor is 64 MB or more, past the 60 MB L2, so every launch streams from HBM.
//
// Usage: mxattn_prefill_bench [--json PATH] [--quick]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "mxattn/attention.h"
#include "mxattn/cuda_prefill.h"

namespace {

// Roughly normal bf16 values (a sum of four uniforms), never zero tensors: zeros run faster.
__global__ void fill_normal_bf16(uint16_t* data, int64_t count, uint64_t seed) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < count;
       n += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t a = device_hash(seed * 0x9e3779b97f4a7c15ull + uint64_t(n));
    const uint32_t b = device_hash(~seed * 0x9e3779b97f4a7c15ull + uint64_t(n));
    const float sum = float(a & 0xffff) + float(a >> 16) + float(b & 0xffff) + float(b >> 16);
    const float x = (sum / 65536.0f - 2.0f) * 1.7320508f;
    data[n] = uint16_t(__float_as_uint(x) >> 16);
  }
}

struct Result {
  int64_t dim = 0;
  bool causal = false;
  double ms = 0;
  double tflops = 0;
};

Result run_case(int64_t batch, int64_t heads, int64_t seq, int64_t dim, bool causal, int reps) {
  using mxattn::DType;
  const int64_t elems = batch * seq * heads * dim;
  uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  CHECK_CUDA(cudaMalloc(&q, size_t(elems) * 2));
  CHECK_CUDA(cudaMalloc(&k, size_t(elems) * 2));
  CHECK_CUDA(cudaMalloc(&v, size_t(elems) * 2));
  CHECK_CUDA(cudaMalloc(&o, size_t(elems) * 2));
  fill_normal_bf16<<<1024, 256>>>(q, elems, 1);
  fill_normal_bf16<<<1024, 256>>>(k, elems, 2);
  fill_normal_bf16<<<1024, 256>>>(v, elems, 3);
  CHECK_CUDA(cudaGetLastError());

  mxattn::AttentionArgs args;
  args.q = mxattn::make_view(q, DType::bf16, {batch, seq, heads, dim});
  args.k = mxattn::make_view(k, DType::bf16, {batch, seq, heads, dim});
  args.v = mxattn::make_view(v, DType::bf16, {batch, seq, heads, dim});
  args.o = mxattn::make_view(o, DType::bf16, {batch, seq, heads, dim});
  args.causal = causal ? mxattn::Causal::top_left : mxattn::Causal::none;
  mxattn::cuda::PrefillPlan plan;
  check_status(mxattn::cuda::plan_prefill(args, &plan), "plan_prefill");

  for (int i = 0; i < 3; ++i) check_status(mxattn::cuda::run_prefill(plan, args, nullptr), "run");
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    CHECK_CUDA(cudaEventRecord(start));
    check_status(mxattn::cuda::run_prefill(plan, args, nullptr), "run");
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaFree(q));
  CHECK_CUDA(cudaFree(k));
  CHECK_CUDA(cudaFree(v));
  CHECK_CUDA(cudaFree(o));

  Result res;
  res.dim = dim;
  res.causal = causal;
  res.ms = times[times.size() / 2];
  const double flops =
      4.0 * double(batch * heads) * double(seq) * double(seq) * double(dim) / (causal ? 2.0 : 1.0);
  res.tflops = flops / (res.ms * 1e-3) / 1e12;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--quick]\n", argv[0]);
      return 2;
    }
  }
  const int64_t batch = 4, heads = 32, seq = 4096;
  const int reps = quick ? 5 : 20;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));

  std::vector<Result> results;
  std::printf("%-34s %10s %10s\n", "shape (bf16)", "ms", "TFLOP/s");
  for (const int64_t dim : {64, 128, 256}) {
    for (const bool causal : {false, true}) {
      const Result r = run_case(batch, heads, seq, dim, causal, reps);
      results.push_back(r);
      std::printf("B%lld H%lld S%lld D%-4lld %-12s %10.3f %10.1f\n", (long long)batch,
                  (long long)heads, (long long)seq, (long long)dim,
                  causal ? "causal" : "non-causal", r.ms, r.tflops);
    }
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(
        f, "{\"device\": \"%s\", \"batch\": %lld, \"heads\": %lld, \"seq\": %lld, \"results\": [",
        prop.name, (long long)batch, (long long)heads, (long long)seq);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f, "%s{\"dim\": %lld, \"causal\": %s, \"ms\": %.5f, \"tflops\": %.2f}",
                   i ? ", " : "", (long long)r.dim, r.causal ? "true" : "false", r.ms, r.tflops);
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
