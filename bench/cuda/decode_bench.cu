// Decode benchmark of the CUDA engine: how long one decode step (Sq = 1, D = 128) takes per batch
// shape and KV storage type, with the engine's own choices (tiles, split-KV), timed with CUDA
// events around CUDA-graph replays, beside a read-only bandwidth probe run in the same process.
// Prints a table and, with --json, writes JSON; bench/cuda/torch_sdpa_decode.py times the anchors
// (cuDNN and FlashAttention-2 through PyTorch SDPA, FlashAttention-3 with bf16 and FP8 caches) on
// the same shapes, and bench/cuda/plot_decode.py joins the two.
//
// Bytes counted: K and V once (codes and scales), the roofline of a decode step. Large shapes read
// far more than the 60 MB L2, so each replay streams from HBM; the small shapes (1k and 8k keys)
// are the latency cases and are reported as measured, L2 included.
//
// Usage: mxattn_decode_bench [--json PATH] [--quick] [--shapes A,B] [--kvs X,Y] [--repeat N]
//                            [--dim D]      (--help lists them)
//   --shapes / --kvs: only the shapes whose names contain one of the given strings, for the given
//   KV types (a focused run, e.g. to compare two builds). --repeat N: the chosen rows N times, in
//   turn. --dim: head dims other than 128 (192: Dqk 192, Dv 128; the shape names say so), which
//   the anchors do not time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "bench_util.h"
#include "cli.h"
#include "mxattn/attention.h"
#include "mxattn/cuda.h"

namespace {

enum class Fill { bf16_values, e4m3_codes, e5m2_codes, any_codes, scales };

// Random finite contents of each kind: bf16 in (-1, 1), MX codes without NaN/Inf, E8M0 scales
// near 1.
__global__ void fill_kernel(uint8_t* data, int64_t bytes, Fill kind, uint64_t seed) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < bytes;
       n += int64_t(gridDim.x) * blockDim.x) {
    uint32_t r = device_hash(seed * 0x9e3779b97f4a7c15ull + uint64_t(n));
    uint8_t b = uint8_t(r);
    switch (kind) {
      case Fill::bf16_values:
        // Odd bytes are bf16 high bytes: sign and an exponent below 127 keep |x| < 1.
        b = (n & 1) ? uint8_t((r & 0x80u) | (0x38u + (r >> 8) % 6)) : uint8_t(r >> 16);
        break;
      case Fill::e4m3_codes:
        if ((b & 0x7f) == 0x7f) b ^= 1;
        break;
      case Fill::e5m2_codes:
        if ((b & 0x7c) == 0x7c) b &= 0xbf;
        break;
      case Fill::scales:
        b = uint8_t(120 + r % 8);
        break;
      case Fill::any_codes:
        break;
    }
    data[n] = b;
  }
}

// Read-only bandwidth probe: every 16-byte vector read once, folded so nothing is optimized away.
__global__ void read_probe_kernel(const uint4* data, int64_t vectors, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < vectors;
       n += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(data + n);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  int64_t bytes = 0;
  explicit DeviceBuffer(int64_t n) : bytes(n) {
    CHECK_CUDA(cudaMalloc(&ptr, size_t(std::max<int64_t>(n, 1))));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void fill(Fill kind, uint64_t seed) {
    fill_kernel<<<1024, 256>>>(static_cast<uint8_t*>(ptr), bytes, kind, seed);
    CHECK_CUDA(cudaGetLastError());
  }
};

// Median time of `reps` launches of `graph`, each timed with events, in microseconds; replays run
// back to back `batch` at a time so that launch gaps are those of a graph replay.
double time_graph(cudaGraphExec_t graph, cudaStream_t stream, int reps, int batch) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int w = 0; w < 3; ++w) CHECK_CUDA(cudaGraphLaunch(graph, stream));
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int n = 0; n < batch; ++n) CHECK_CUDA(cudaGraphLaunch(graph, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(double(ms) * 1000.0 / batch);
  }
  std::sort(times.begin(), times.end());
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return times[times.size() / 2];
}

template <class Launch>
cudaGraphExec_t capture(cudaStream_t stream, Launch launch) {
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  launch();
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphDestroy(graph));
  return exec;
}

double probe_bandwidth(cudaStream_t stream, int reps) {
  const int64_t bytes = int64_t(2) << 30;
  DeviceBuffer buf(bytes), sink(4);
  buf.fill(Fill::any_codes, 1);
  const cudaGraphExec_t graph = capture(stream, [&] {
    read_probe_kernel<<<132 * 16, 512, 0, stream>>>(static_cast<const uint4*>(buf.ptr), bytes / 16,
                                                    static_cast<uint32_t*>(sink.ptr));
  });
  const double us = time_graph(graph, stream, reps, 1);
  CHECK_CUDA(cudaGraphExecDestroy(graph));
  return double(bytes) / (us * 1e-6) / 1e9;
}

struct Shape {
  const char* name;
  int64_t batch, heads_q, heads_kv, keys;
  int64_t seq_q = 1;  // query rows per sequence (no mask)
  int64_t dim_qk = 128, dim_v = 128;
};

struct Result {
  std::string shape, kv;
  int64_t tile_n = 0;  // the engine's key tile (DecodePlan::tile_n)
  double us = 0, kv_bytes = 0, gbps = 0;
  int64_t ctas = 0;
};

mxattn::TensorView view(void* data, mxattn::DType t, std::initializer_list<int64_t> shape) {
  return mxattn::make_view(data, t, shape);
}

// The shape's name, with the head dims where they are not 128.
std::string shape_name(const Shape& s) {
  std::string name = s.name;
  if (s.dim_qk == 128 && s.dim_v == 128) return name;
  // (appends: GCC 12's -Wrestrict misfires on a chain of std::string + here)
  name += "_D";
  name += std::to_string(s.dim_qk);
  if (s.dim_v != s.dim_qk) {
    name += 'x';
    name += std::to_string(s.dim_v);
  }
  return name;
}

Result run_shape(const Shape& s, mxattn::DType kv, cudaStream_t stream, int reps) {
  using mxattn::DType;
  const int64_t dqk = s.dim_qk, dv = s.dim_v;
  const bool mx = mxattn::is_mx(kv);
  const int64_t k_elems = s.batch * s.keys * s.heads_kv * dqk;
  const int64_t v_elems = s.batch * s.keys * s.heads_kv * dv;
  const int64_t k_bytes = k_elems * mxattn::bits_of(kv) / 8;
  const int64_t v_bytes = v_elems * mxattn::bits_of(kv) / 8;
  const int64_t k_scale_bytes = mx ? k_elems / 32 : 0;
  const int64_t v_scale_bytes = mx ? v_elems / 32 : 0;
  DeviceBuffer q(s.batch * s.seq_q * s.heads_q * dqk * 2),
      o(s.batch * s.seq_q * s.heads_q * dv * 2);
  DeviceBuffer k(k_bytes), v(v_bytes), ks(k_scale_bytes), vs(v_scale_bytes);
  q.fill(Fill::bf16_values, 1);
  const Fill codes = kv == DType::bf16   ? Fill::bf16_values
                     : kv == DType::e4m3 ? Fill::e4m3_codes
                     : kv == DType::e5m2 ? Fill::e5m2_codes
                                         : Fill::any_codes;
  k.fill(codes, 2);
  v.fill(codes, 3);
  if (mx) {
    ks.fill(Fill::scales, 4);
    vs.fill(Fill::scales, 5);
  }
  std::vector<int32_t> kv_len(size_t(s.batch), int32_t(s.keys));

  mxattn::AttentionArgs a;
  a.q = view(q.ptr, DType::bf16, {s.batch, s.seq_q, s.heads_q, dqk});
  a.k = view(k.ptr, kv, {s.batch, s.keys, s.heads_kv, dqk});
  a.v = view(v.ptr, kv, {s.batch, s.keys, s.heads_kv, dv});
  a.o = view(o.ptr, DType::bf16, {s.batch, s.seq_q, s.heads_q, dv});
  if (mx) {
    a.k_scales = view(ks.ptr, DType::e8m0, {s.batch, s.keys, s.heads_kv, dqk / 32});
    a.v_scales = view(vs.ptr, DType::e8m0, {s.batch, s.keys, s.heads_kv, dv / 32});
  }
  a.kv_len = view(kv_len.data(), DType::i32, {s.batch});
  a.split.split_kv = 0;  // auto: the engine splits the keys to fill the GPU

  mxattn::cuda::DecodePlan plan;
  check_status(mxattn::cuda::plan_decode(a, &plan), "plan_decode");
  check_status(mxattn::cuda::run_decode(plan, a, stream), "run_decode");
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const cudaGraphExec_t graph = capture(
      stream, [&] { check_status(mxattn::cuda::run_decode(plan, a, stream), "run_decode"); });
  const bool small = k_bytes + v_bytes < (int64_t(512) << 20);
  Result r;
  r.shape = shape_name(s);
  r.kv = std::string(mxattn::name_of(kv));
  r.tile_n = plan.tile_n();
  r.us = time_graph(graph, stream, reps, small ? 50 : 5);
  r.kv_bytes = double(k_bytes + v_bytes + k_scale_bytes + v_scale_bytes);
  r.gbps = r.kv_bytes / (r.us * 1e-6) / 1e9;
  r.ctas = plan.split_blocks();
  CHECK_CUDA(cudaGraphExecDestroy(graph));
  return r;
}

// Whether `name` is wanted: every name where `wanted` is empty, else one that contains (or, not
// `substring`, equals) one of its items.
bool chosen(const std::vector<std::string>& wanted, const std::string& name, bool substring) {
  if (wanted.empty()) return true;
  for (const std::string& w : wanted)
    if (substring ? name.find(w) != std::string::npos : name == w) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kProgram = "mxattn_decode_bench";
  std::string json_path, shapes_text, kvs_text;
  bool quick = false;
  int64_t repeat = 1, dim = 128;
  mxattn::tools::FlagParser flags = mxattn::tools::FlagParser::for_program(
      kProgram, "[flags]",
      "One CUDA decode step per batch shape and KV storage type, timed over CUDA-graph replays\n"
      "beside a read-only bandwidth probe.");
  flags.add_string("json", &json_path, "FILE", "also write the results here as JSON");
  flags.add_bool("quick", &quick, "5 timed batches of replays per row instead of 15");
  flags.add_string("shapes", &shapes_text, "A,B",
                   "only the shapes whose names contain one of these (default: all)");
  flags.add_string("kvs", &kvs_text, "T,T",
                   "only these KV types (default: bf16, f16 and every MX)");
  flags.add_int("repeat", &repeat, "time the chosen rows this many times, in turn");
  flags.add_int("dim", &dim, "head dim: 64, 128, 192 (Dqk 192, Dv 128) or 256");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (dim != 64 && dim != 128 && dim != 192 && dim != 256) {
    return flags.usage_error("--dim must be 64, 128, 192 (Dqk 192, Dv 128) or 256");
  }
  if (repeat < 1) return flags.usage_error("--repeat must be at least 1");
  std::vector<mxattn::DType> kvs = {mxattn::DType::bf16, mxattn::DType::f16,  mxattn::DType::e4m3,
                                    mxattn::DType::e5m2, mxattn::DType::e2m3, mxattn::DType::e3m2,
                                    mxattn::DType::e2m1};
  const auto cache_type = [](mxattn::DType t) {
    return t == mxattn::DType::bf16 || t == mxattn::DType::f16 || mxattn::is_mx(t);
  };
  if (!kvs_text.empty()) {
    if (auto problem = mxattn::bench::parse_dtypes("kvs", kvs_text, cache_type,
                                                   "bf16, f16 or an MX type", &kvs)) {
      return flags.usage_error(*problem);
    }
  }
  const std::vector<std::string> only_shapes = mxattn::bench::split_list(shapes_text);
  if (!json_path.empty() && !mxattn::bench::json_writable(kProgram, json_path)) return 1;
  const int reps = quick ? 5 : 15;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));

  const double probe = probe_bandwidth(stream, reps);
  Shape shapes[] = {{"B1_H32_K32_S128k", 1, 32, 32, 131072},
                    {"B8_H32_K8_S32k", 8, 32, 8, 32768},
                    {"B64_H32_K8_S4k", 64, 32, 8, 4096},
                    {"B1_H32_K32_S1k_graph", 1, 32, 32, 1024},
                    {"B1_H32_K32_S8k_graph", 1, 32, 32, 8192}};
  for (Shape& s : shapes) {
    s.dim_qk = dim;
    s.dim_v = dim == 192 ? 128 : dim;
  }
  std::vector<Result> results;
  for (int64_t r = 0; r < repeat; ++r)
    for (const Shape& s : shapes)
      for (mxattn::DType kv : kvs)
        if (chosen(only_shapes, s.name, true)) results.push_back(run_shape(s, kv, stream, reps));

  std::printf("device: %s, %d SMs; read-only probe over 2 GiB: %.0f GB/s\n", prop.name,
              prop.multiProcessorCount, probe);
  std::printf("%-22s %-6s %7s %10s %9s %7s %7s\n", "shape", "kv", "tile_n", "time_us", "GB/s",
              "%probe", "CTAs");
  mxattn::bench::Json rows = mxattn::bench::Json::array();
  for (const Result& r : results) {
    std::printf("%-22s %-6s %7lld %10.2f %9.0f %6.1f%% %7lld\n", r.shape.c_str(), r.kv.c_str(),
                static_cast<long long>(r.tile_n), r.us, r.gbps, 100.0 * r.gbps / probe,
                static_cast<long long>(r.ctas));
    rows.push_back({{"shape", r.shape},
                    {"kv", r.kv},
                    {"tile_n", r.tile_n},
                    {"us", r.us},
                    {"kv_bytes", r.kv_bytes},
                    {"gbps", r.gbps},
                    {"percent_of_probe", 100.0 * r.gbps / probe},
                    {"ctas", r.ctas}});
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  if (json_path.empty()) return 0;
  const mxattn::bench::Json j = {{"device", prop.name}, {"probe_gbps", probe}, {"results", rows}};
  return mxattn::bench::write_json(kProgram, json_path, j) ? 0 : 1;
}
