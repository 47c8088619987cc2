// Prefill benchmark of the CUDA engine: how fast the forward pass of a long prompt runs. B = 4,
// H = 32, S = 4096, bf16 Q/K/V and O, head dims 64, 128 and 256, causal (top-left) and not, timed
// with CUDA events (median of repeated launches after a warm-up). Prints a table and, with --json,
// writes JSON; bench/cuda/torch_sdpa_prefill.py times the anchors in the same call (cuDNN and
// FlashAttention-2 through PyTorch SDPA, FlashAttention-3 in bf16 and FP8, and the bf16 matrix
// rate) and joins them.
//
// FLOPs counted as FlashAttention does: 4 * B * H * Sq * Sk * D (two GEMMs), halved when causal.
// Each tensor is 64 MB or more, past the 60 MB L2, so every launch streams from HBM.
//
// Block-sparse rows: the same shapes, non-causal, with a layout of 128 x 128 blocks per head
// (broadcast over the batch) listing exactly a quarter of the key blocks of every query block,
// chosen at random: the time beside the dense time of the same shape, and the speed-up (the
// target is 3.2x at 25% density). TFLOP/s of a sparse row count only the listed blocks.
//
// MX rows: Q, K and V of MXFP8 E4M3 and MXFP4 E2M1 (random valid codes, E8M0 scales along the
// head dim), non-causal, beside the bf16 time of the same shape (the target is 0.9x or more).
//
// Usage: mxattn_prefill_bench [--json PATH] [--quick] [--dims 64,128,256] [--dense]
//   (--help lists them) --dims: only these head dims; --dense: the bf16 dense rows only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "bench_util.h"
#include "cli.h"
#include "mxattn/attention.h"
#include "mxattn/cuda_prefill.h"
#include "workload/data.h"

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

// Random MX codes that are never NaN (E4M3: the top exponent bit cleared, |x| < 2; E2M1: any
// nibble), and E8M0 scales 2^-7 .. 2^0: a valid MX tensor of normal-looking magnitudes.
__global__ void fill_mx(uint8_t* codes, int64_t code_bytes, uint8_t* scales, int64_t scale_count,
                        bool e4m3, uint64_t seed) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < code_bytes;
       n += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = device_hash(seed * 0x9e3779b97f4a7c15ull + uint64_t(n));
    codes[n] = uint8_t(e4m3 ? (h & 0xbfu) : h);
    if (n < scale_count) scales[n] = uint8_t(120 + (h >> 24) % 8);
  }
}

struct Result {
  mxattn::DType format = mxattn::DType::bf16;
  int64_t dim = 0;
  bool causal = false;
  double density = 1.0;  // fraction of key blocks listed (1: dense)
  double ms = 0;
  double tflops = 0;
};

// A BSR layout [1, heads, seq / block + 1] / [1, heads, nnz] (broadcast over the batch) listing
// `per_row` random key blocks of each query block.
struct SparseBench {
  int32_t block = 128;
  int64_t per_row = 0;
  std::vector<int32_t> row_ptr;
  std::vector<int32_t> col_idx;
};

SparseBench make_sparse_layout(int64_t heads, int64_t seq, int32_t block, double density) {
  SparseBench sb;
  sb.block = block;
  const int64_t blocks = seq / block;
  sb.per_row = std::max<int64_t>(1, int64_t(double(blocks) * density));
  std::mt19937_64 rng(12345);
  for (int64_t h = 0; h < heads; ++h) {
    mxattn::workload::draw_fixed_count_rows(rng, blocks, blocks, sb.per_row, &sb.row_ptr,
                                            &sb.col_idx);
  }
  return sb;
}

// Q, K and V of `format` (bf16, or an MX format with E8M0 scales per 32 along the head dim), O
// bf16.
Result run_case(int64_t batch, int64_t heads, int64_t seq, int64_t dim, bool causal, int reps,
                SparseBench* sparse = nullptr, mxattn::DType format = mxattn::DType::bf16) {
  using mxattn::DType;
  const int64_t elems = batch * seq * heads * dim;
  const bool mx = format != DType::bf16;
  const int64_t in_bytes = elems * mxattn::bits_of(format) / 8;
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  uint8_t* scales[3] = {};
  void** inputs[3] = {&q, &k, &v};
  mxattn::AttentionArgs args;
  mxattn::TensorView* views[3] = {&args.q, &args.k, &args.v};
  mxattn::TensorView* scale_views[3] = {&args.q_scales, &args.k_scales, &args.v_scales};
  for (int t = 0; t < 3; ++t) {
    CHECK_CUDA(cudaMalloc(inputs[t], size_t(in_bytes)));
    if (mx) {
      CHECK_CUDA(cudaMalloc(&scales[t], size_t(elems / 32)));
      fill_mx<<<1024, 256>>>(static_cast<uint8_t*>(*inputs[t]), in_bytes, scales[t], elems / 32,
                             format == DType::e4m3, uint64_t(t + 1));
      *scale_views[t] = mxattn::make_view(scales[t], DType::e8m0, {batch, seq, heads, dim / 32});
    } else {
      fill_normal_bf16<<<1024, 256>>>(static_cast<uint16_t*>(*inputs[t]), elems, uint64_t(t + 1));
    }
    *views[t] = mxattn::make_view(*inputs[t], format, {batch, seq, heads, dim});
  }
  CHECK_CUDA(cudaMalloc(&o, size_t(elems) * 2));
  CHECK_CUDA(cudaGetLastError());
  args.o = mxattn::make_view(o, DType::bf16, {batch, seq, heads, dim});
  args.causal = causal ? mxattn::Causal::top_left : mxattn::Causal::none;
  double density = 1.0;
  if (sparse != nullptr) {
    const int64_t blocks = seq / sparse->block;
    args.sparse.block_q = args.sparse.block_k = sparse->block;
    args.sparse.row_ptr =
        mxattn::make_view(sparse->row_ptr.data(), DType::i32, {1, heads, blocks + 1});
    args.sparse.col_idx =
        mxattn::make_view(sparse->col_idx.data(), DType::i32, {1, heads, blocks * sparse->per_row});
    density = double(sparse->per_row) / double(blocks);
  }
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
  for (int t = 0; t < 3; ++t) {
    CHECK_CUDA(cudaFree(*inputs[t]));
    CHECK_CUDA(cudaFree(scales[t]));
  }
  CHECK_CUDA(cudaFree(o));

  Result res;
  res.format = format;
  res.dim = dim;
  res.causal = causal;
  res.density = density;
  res.ms = times[times.size() / 2];
  const double flops = 4.0 * double(batch * heads) * double(seq) * double(seq) * double(dim) *
                       density / (causal ? 2.0 : 1.0);
  res.tflops = flops / (res.ms * 1e-3) / 1e12;
  return res;
}

// A row of the JSON: the shape's head dim and mask, its time and rate.
mxattn::bench::Json row_json(const Result& r) {
  return {{"format", std::string(mxattn::name_of(r.format))},
          {"dim", r.dim},
          {"causal", r.causal},
          {"density", r.density},
          {"ms", r.ms},
          {"tflops", r.tflops}};
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kProgram = "mxattn_prefill_bench";
  std::string json_path;
  bool quick = false;
  bool dense_only = false;
  std::vector<int64_t> dims = {64, 128, 256};
  mxattn::tools::FlagParser flags = mxattn::tools::FlagParser::for_program(
      kProgram, "[flags]",
      "The CUDA prefill engine on B4 H32 S4096: bf16 causal and not, block-sparse at 25%, and MX\n"
      "Q/K/V, per head dim.");
  flags.add_string("json", &json_path, "FILE", "also write the results here as JSON");
  flags.add_bool("quick", &quick, "5 timed launches per row instead of 20");
  flags.add_int_list("dims", &dims, "head dims among 64, 128 and 256");
  flags.add_bool("dense", &dense_only, "the bf16 dense rows only (no sparse and MX rows)");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  for (const int64_t d : dims) {
    if (d != 64 && d != 128 && d != 256) {
      return flags.usage_error("--dims: head dims among 64, 128 and 256, not " + std::to_string(d));
    }
  }
  if (!json_path.empty() && !mxattn::bench::json_writable(kProgram, json_path)) return 1;
  using mxattn::DType;
  const int64_t batch = 4, heads = 32, seq = 4096;
  const int reps = quick ? 5 : 20;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));

  std::vector<Result> results;
  std::printf("%-34s %10s %10s\n", "shape (bf16)", "ms", "TFLOP/s");
  for (const int64_t dim : dims) {
    for (const bool causal : {false, true}) {
      const Result r = run_case(batch, heads, seq, dim, causal, reps);
      results.push_back(r);
      std::printf("B%lld H%lld S%lld D%-4lld %-12s %10.3f %10.1f\n", (long long)batch,
                  (long long)heads, (long long)seq, (long long)dim,
                  causal ? "causal" : "non-causal", r.ms, r.tflops);
    }
  }
  // The dense bf16 non-causal time at head dim `dim`, which the sparse and MX rows are set beside.
  const auto non_causal_ms = [&results](int64_t dim) {
    for (const Result& d : results)
      if (d.dim == dim && !d.causal) return d.ms;
    return 0.0;
  };
  constexpr double kSparseDensity = 0.25;
  std::vector<Result> sparse_results;
  std::vector<double> speedups;
  std::printf("\n%-34s %10s %10s %10s\n", "block-sparse 128x128, 25% (bf16)", "ms", "TFLOP/s",
              "x dense");
  SparseBench layout = make_sparse_layout(heads, seq, 128, kSparseDensity);
  for (const int64_t dim : dense_only ? std::vector<int64_t>{} : dims) {
    const Result r = run_case(batch, heads, seq, dim, false, reps, &layout);
    sparse_results.push_back(r);
    speedups.push_back(non_causal_ms(dim) / r.ms);
    std::printf("B%lld H%lld S%lld D%-4lld %-12s %10.3f %10.1f %10.2f\n", (long long)batch,
                (long long)heads, (long long)seq, (long long)dim, "non-causal", r.ms, r.tflops,
                speedups.back());
  }
  // MX Q, K and V (scales along the head dim), non-causal, beside the bf16 time of the same shape.
  std::vector<Result> mx_results;
  std::vector<double> mx_ratios;
  std::printf("\n%-34s %10s %10s %10s\n", "MX Q/K/V (dequantized to bf16)", "ms", "TFLOP/s",
              "x bf16");
  for (const DType format : {DType::e4m3, DType::e2m1}) {
    for (const int64_t dim : dense_only ? std::vector<int64_t>{} : dims) {
      const Result r = run_case(batch, heads, seq, dim, false, reps, nullptr, format);
      mx_results.push_back(r);
      mx_ratios.push_back(non_causal_ms(dim) / r.ms);
      std::printf("B%lld H%lld S%lld D%-4lld %-12s %10.3f %10.1f %10.2f\n", (long long)batch,
                  (long long)heads, (long long)seq, (long long)dim,
                  std::string(mxattn::name_of(format)).c_str(), r.ms, r.tflops, mx_ratios.back());
    }
  }
  if (json_path.empty()) return 0;
  mxattn::bench::Json dense = mxattn::bench::Json::array(), sparse = mxattn::bench::Json::array(),
                      mx = mxattn::bench::Json::array();
  for (const Result& r : results) dense.push_back(row_json(r));
  for (size_t i = 0; i < sparse_results.size(); ++i) {
    mxattn::bench::Json row = row_json(sparse_results[i]);
    row["block"] = layout.block;
    row["speedup_vs_dense"] = speedups[i];
    sparse.push_back(row);
  }
  for (size_t i = 0; i < mx_results.size(); ++i) {
    mxattn::bench::Json row = row_json(mx_results[i]);
    row["ratio_to_bf16"] = mx_ratios[i];
    mx.push_back(row);
  }
  const mxattn::bench::Json j = {
      {"device", prop.name}, {"batch", batch},   {"heads", heads}, {"seq", seq},
      {"results", dense},    {"sparse", sparse}, {"mx", mx}};
  return mxattn::bench::write_json(kProgram, json_path, j) ? 0 : 1;
}
