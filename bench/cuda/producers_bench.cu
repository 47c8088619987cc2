// The GPU's MX producers and the combine, each beside the copy that moves its bytes: how fast a
// serving engine fills and merges MX state on the device.
//   quantize   1 GiB of bf16 [N, 128] to MXFP8 and MXFP4 along the head dim, against a
//              device-to-device copy of the same bytes (what torch's copy does)
//   write_kv   one decode step (64 tokens, 8 KV heads, D 128, K and V) into MXFP8, MXFP4 and
//              bf16 caches, GPU time per launch; and a 32k-token prefill into MXFP8, against the
//              copy of its bytes
//   combine    32 splits of [B 64, Sq 16, Hq 32, Dv 128] f32 partials (0.54 GB), against the copy
// Times are medians of CUDA-event-timed launches after a warm-up. Prints a table and, with --json,
// writes the rows as JSON.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "bench_util.h"
#include "cli.h"
#include "mxattn/combine.h"
#include "mxattn/kv_cache.h"
#include "mxattn/mx.h"

namespace {

using mxattn::DType;
using mxattn::TensorView;
using mxattn::bench::Json;

__global__ void fill_random(uint16_t* out, int64_t n, uint64_t seed, bool bf16) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = device_hash(seed * 0x9e3779b97f4a7c15ull + uint64_t(i));
    const float x = (float(h & 0xffff) / 32768.0f - 1.0f) * float(1 + (h >> 28));
    const uint32_t bits = __float_as_uint(x);
    out[i] = bf16 ? uint16_t(bits >> 16) : uint16_t(0x3c00 | (h & 0x3ff));
  }
}

__global__ void fill_floats(float* out, int64_t n, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = device_hash(seed + uint64_t(i));
    out[i] = float(h & 0xffff) / 8192.0f - 4.0f;
  }
}

struct DeviceBuffer {
  explicit DeviceBuffer(int64_t bytes) { CHECK_CUDA(cudaMalloc(&ptr, size_t(std::max<int64_t>(bytes, 1)))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* ptr = nullptr;
};

// Median time in microseconds of `reps` launches of `work`, each timed with events.
double median_us(const std::function<void()>& work, int reps) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) work();
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    work();
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(double(ms) * 1e3);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// The copy of `bytes` bytes device to device: read plus write bandwidth, the yardstick.
double copy_gbps(int64_t bytes, int reps) {
  DeviceBuffer a(bytes), b(bytes);
  CHECK_CUDA(cudaMemset(a.ptr, 1, size_t(bytes)));
  const double us = median_us(
      [&] { CHECK_CUDA(cudaMemcpyAsync(b.ptr, a.ptr, size_t(bytes), cudaMemcpyDeviceToDevice)); },
      reps);
  return 2.0 * double(bytes) / (us * 1e-6) / 1e9;
}

struct Row {
  std::string what;
  double us = 0;
  double bytes = 0;  // read plus written
  double copy_gbps = 0;
  double gbps() const { return bytes / (us * 1e-6) / 1e9; }
};

void print_row(const Row& r) {
  std::printf("%-44s %10.2f %9.3f %8.0f %8.0f %7.1f%%\n", r.what.c_str(), r.us, r.bytes / 1e9,
              r.gbps(), r.copy_gbps, r.copy_gbps > 0 ? 100.0 * r.gbps() / r.copy_gbps : 0.0);
}

Row quantize_row(DType format, int reps) {
  const int64_t rows = (int64_t(1) << 30) / 2 / 128, dim = 128;  // 1 GiB of bf16
  DeviceBuffer src(rows * dim * 2), data(rows * dim * mxattn::bits_of(format) / 8),
      scales(rows * dim / 32);
  fill_random<<<4096, 256>>>(static_cast<uint16_t*>(src.ptr), rows * dim, 1, true);
  CHECK_CUDA(cudaGetLastError());
  const TensorView s = mxattn::make_view(src.ptr, DType::bf16, {rows, dim});
  const TensorView d = mxattn::make_view(data.ptr, format, {rows, dim});
  const TensorView sc = mxattn::make_view(scales.ptr, DType::e8m0, {rows, dim / 32});
  Row r;
  r.what = "quantize 1 GiB bf16 -> " + std::string(mxattn::name_of(format));
  r.us = median_us(
      [&] { check_status(mxattn::quantize(s, d, sc, 1, mxattn::ScaleMode::floor), "quantize"); },
      reps);
  r.bytes = double(s.bytes + d.bytes + sc.bytes);
  r.copy_gbps = copy_gbps(s.bytes, reps);
  return r;
}

Row write_kv_row(DType format, int64_t tokens, int reps, double copy) {
  const int64_t heads = 8, dim = 128, page_size = 16;
  const int64_t pages = (tokens + page_size - 1) / page_size + 8;
  const int64_t row_bytes = dim * mxattn::bits_of(format) / 8;
  DeviceBuffer k(tokens * heads * dim * 2), v(tokens * heads * dim * 2);
  DeviceBuffer k_cache(pages * page_size * heads * row_bytes),
      v_cache(pages * page_size * heads * row_bytes);
  const bool mx = mxattn::is_mx(format);
  DeviceBuffer k_scales(mx ? pages * page_size * heads * dim / 32 : 1),
      v_scales(mx ? pages * page_size * heads * dim / 32 : 1);
  DeviceBuffer slots(tokens * 8);
  fill_random<<<1024, 256>>>(static_cast<uint16_t*>(k.ptr), tokens * heads * dim, 2, true);
  fill_random<<<1024, 256>>>(static_cast<uint16_t*>(v.ptr), tokens * heads * dim, 3, true);
  std::vector<int64_t> host_slots(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) {
    // A decode step's tokens, one per sequence, each at the end of its own pages; a prefill's in
    // order.
    host_slots[size_t(t)] = tokens <= 64 ? t * page_size + 5 : t;
  }
  CHECK_CUDA(cudaMemcpy(slots.ptr, host_slots.data(), size_t(tokens * 8), cudaMemcpyHostToDevice));
  mxattn::KvWriteArgs a;
  a.k = mxattn::make_view(k.ptr, DType::bf16, {tokens, heads, dim});
  a.v = mxattn::make_view(v.ptr, DType::bf16, {tokens, heads, dim});
  a.k_cache = mxattn::make_view(k_cache.ptr, format, {pages, page_size, heads, dim});
  a.v_cache = mxattn::make_view(v_cache.ptr, format, {pages, page_size, heads, dim});
  if (mx) {
    a.k_scales = mxattn::make_view(k_scales.ptr, DType::e8m0, {pages, page_size, heads, dim / 32});
    a.v_scales = mxattn::make_view(v_scales.ptr, DType::e8m0, {pages, page_size, heads, dim / 32});
  }
  a.slot_mapping = mxattn::make_view(slots.ptr, DType::i64, {tokens});
  Row r;
  r.what = "write_kv " + std::to_string(tokens) + " tokens x 8 heads x 128 -> " +
           std::string(mxattn::name_of(format));
  r.us = median_us([&] { check_status(mxattn::write_kv(a), "write_kv"); }, reps);
  r.bytes = double(2 * tokens * heads * (dim * 2 + row_bytes + (mx ? dim / 32 : 0)) + tokens * 8);
  r.copy_gbps = copy;
  return r;
}

Row combine_row(int reps, double copy) {
  const int64_t slots = 32, batch = 64, seq = 16, heads = 32, dim = 128;
  DeviceBuffer po(slots * batch * seq * heads * dim * 4), pl(slots * batch * heads * seq * 4);
  DeviceBuffer counts(batch * heads * seq * 4), o(batch * seq * heads * dim * 2),
      lse(batch * heads * seq * 4);
  fill_floats<<<4096, 256>>>(static_cast<float*>(po.ptr), slots * batch * seq * heads * dim, 5);
  fill_floats<<<256, 256>>>(static_cast<float*>(pl.ptr), slots * batch * heads * seq, 6);
  std::vector<int32_t> all(size_t(batch * heads * seq), int32_t(slots));
  CHECK_CUDA(cudaMemcpy(counts.ptr, all.data(), all.size() * 4, cudaMemcpyHostToDevice));
  mxattn::CombineArgs a;
  a.partial_o = mxattn::make_view(po.ptr, DType::f32, {slots, batch, seq, heads, dim});
  a.partial_lse = mxattn::make_view(pl.ptr, DType::f32, {slots, batch, heads, seq});
  a.counts = mxattn::make_view(counts.ptr, DType::i32, {batch, heads, seq});
  a.o = mxattn::make_view(o.ptr, DType::bf16, {batch, seq, heads, dim});
  a.lse = mxattn::make_view(lse.ptr, DType::f32, {batch, heads, seq});
  Row r;
  r.what = "combine 32 splits, B64 Sq16 Hq32 Dv128 f32";
  r.us = median_us([&] { check_status(mxattn::combine(a), "combine"); }, reps);
  r.bytes = double(a.partial_o.bytes + a.partial_lse.bytes + a.counts.bytes + a.o.bytes +
                   a.lse.bytes);
  r.copy_gbps = copy;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kProgram = "mxattn_producers_bench";
  int64_t reps = 20;
  std::string json_path;
  mxattn::tools::FlagParser flags = mxattn::tools::FlagParser::for_program(
      kProgram, "[flags]",
      "The GPU's MX quantize, cache write and combine, each beside a device copy of its bytes.");
  flags.add_int("reps", &reps, "timed launches of each case");
  flags.add_string("json", &json_path, "FILE", "also write the rows as JSON");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (reps < 1) return flags.usage_error("--reps must be >= 1");
  if (!json_path.empty() && !mxattn::bench::json_writable(kProgram, json_path)) return 1;

  std::vector<Row> rows;
  std::printf("%-44s %10s %9s %8s %8s %8s\n", "case", "us", "GB", "GB/s", "copy", "of copy");
  for (const DType f : {DType::e4m3, DType::e2m1}) rows.push_back(quantize_row(f, int(reps)));
  for (const DType f : {DType::e4m3, DType::e2m1, DType::bf16}) {
    rows.push_back(write_kv_row(f, 64, int(reps), 0));
  }
  const double copy_512m = copy_gbps(int64_t(1) << 29, int(reps));
  rows.push_back(write_kv_row(DType::e4m3, 32768, int(reps), copy_512m));
  rows.push_back(combine_row(int(reps), copy_512m));
  for (const Row& r : rows) print_row(r);
  if (json_path.empty()) return 0;
  Json j;
  j["reps"] = reps;
  Json out = Json::array();
  for (const Row& r : rows) {
    out.push_back({{"case", r.what}, {"us", r.us}, {"bytes", r.bytes}, {"gbps", r.gbps()},
                   {"copy_gbps", r.copy_gbps}});
  }
  j["rows"] = out;
  return mxattn::bench::write_json(kProgram, json_path, j) ? 0 : 1;
}
