// Decode benchmark of the CUDA engine: one decode step (Sq = 1, D = 128) per shape and KV storage
// type, timed with CUDA events around CUDA-graph replays, beside a read-only bandwidth probe run
// in the same process. Prints a table and writes JSON.
//
// Bytes counted: K and V once (codes and scales), the roofline of a decode step. Large shapes read
// far more than the 60 MB L2, so each replay streams from HBM; the small shapes (1k and 8k keys)
// are the latency cases and are reported as measured, L2 included.
//
// Usage: mxattn_decode_bench [--json PATH] [--quick] [--shapes A,B] [--kvs X,Y] [--repeat N]
//                            [--dim D]
//   --shapes / --kvs: only the engine's own rows of the shapes whose names contain one of the
//   given strings, for the given KV types (a focused run, e.g. to compare two builds; no sweeps,
//   no combine-only shape). --repeat N: run the chosen rows N times, in turn. --dim: head dims
//   other than 128 (192: Dqk 192, Dv 128), a focused run whose shape names say so. --wide: the
//   focused rows of MX caches on the general kernel (DecodeOptions::narrow_mx = false).
//   --timeline CSV (a build with -DMXATTN_TIMELINE=ON): after timing each focused row, one more
//   plain launch records every CTA's timestamps (record_timeline in bench_common.cuh).
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
  int64_t tile_n = 0;
  bool default_tile = true;     // tile_n is the engine's own choice (default_tile_n)
  int64_t tiles_per_split = 0;  // the auto split's target; 0: the engine's default
  int32_t splits_per_cta = 0;   // DecodeOptions::splits_per_cta; 0: the engine's choice
  bool wide_mx = false;         // DecodeOptions::narrow_mx off: the general kernel for MX caches
  double us = 0, kv_bytes = 0, gbps = 0;
  int64_t ctas = 0;
  bool combines = false;
  double combine_us = 0, combine_gbps = 0;
};

// The CSV file that --timeline appends to (nullptr: no timeline).
const char* g_timeline_csv = nullptr;

mxattn::TensorView view(void* data, mxattn::DType t, std::initializer_list<int64_t> shape) {
  return mxattn::make_view(data, t, shape);
}

Result run_shape(const Shape& s, mxattn::DType kv, int64_t tile_n, cudaStream_t stream, int reps,
                 int64_t tiles_per_split = 0, int32_t splits_per_cta = 0, bool wide_mx = false) {
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
  a.split.split_kv = 0;
  a.split.tile_n = int32_t(tile_n);
  a.split.auto_target = int32_t(tiles_per_split);

  mxattn::cuda::DecodePlan plan;
  check_status(mxattn::cuda::plan_decode(a, &plan,
                                         {.splits_per_cta = splits_per_cta, .narrow_mx = !wide_mx}),
               "plan_decode");
  check_status(mxattn::cuda::run_decode(plan, a, stream), "run_decode");
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const cudaGraphExec_t graph = capture(
      stream, [&] { check_status(mxattn::cuda::run_decode(plan, a, stream), "run_decode"); });
  const bool small = k_bytes + v_bytes < (int64_t(512) << 20);
  Result r;
  r.shape = s.name;
  if (dqk != 128 || dv != 128) {
    char suffix[32];
    if (dv != dqk) {
      std::snprintf(suffix, sizeof suffix, "_D%lldx%lld", static_cast<long long>(dqk),
                    static_cast<long long>(dv));
    } else {
      std::snprintf(suffix, sizeof suffix, "_D%lld", static_cast<long long>(dqk));
    }
    r.shape += suffix;
  }
  r.kv = std::string(mxattn::name_of(kv));
  r.tile_n = tile_n > 0 ? tile_n : mxattn::cuda::default_tile_n(s.keys);
  r.default_tile = tile_n == 0;
  r.tiles_per_split = tiles_per_split;
  r.splits_per_cta = splits_per_cta;
  r.wide_mx = wide_mx;
  r.us = time_graph(graph, stream, reps, small ? 50 : 5);
  r.kv_bytes = double(k_bytes + v_bytes + k_scale_bytes + v_scale_bytes);
  r.gbps = r.kv_bytes / (r.us * 1e-6) / 1e9;
  r.ctas = plan.split_blocks();
  r.combines = plan.combines();
  CHECK_CUDA(cudaGraphExecDestroy(graph));
#ifdef MXATTN_TIMELINE
  if (g_timeline_csv != nullptr) {
    record_timeline(g_timeline_csv, r.shape + "," + r.kv, plan.split_blocks(), kDecodeMarks,
                    [&] { check_status(mxattn::cuda::run_decode(plan, a, stream), "run_decode"); });
  }
#endif
  if (plan.combines()) {
    const cudaGraphExec_t combine = capture(
        stream, [&] { check_status(mxattn::cuda::run_combine(plan, a, stream), "run_combine"); });
    r.combine_us = time_graph(combine, stream, reps, 20);
    // Its own bytes: every slot's partial O and L_s read (an upper bound: splits past a row's
    // count are skipped), O written.
    const double rows = double(s.batch * s.seq_q * s.heads_q);
    const double slots = double(plan.partial_slots());
    r.combine_gbps = rows * (slots * (dv * 4 + 4) + dv * 2) / (r.combine_us * 1e-6) / 1e9;
    CHECK_CUDA(cudaGraphExecDestroy(combine));
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "decode_bench.json";
  bool quick = false;
  std::vector<std::string> only_shapes, only_kvs;
  int repeat = 1;
  int dim = 128;
  bool wide = false;
  for (int n = 1; n < argc; ++n) {
    if (std::strcmp(argv[n], "--json") == 0 && n + 1 < argc) {
      json_path = argv[++n];
    } else if (std::strcmp(argv[n], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[n], "--shapes") == 0 && n + 1 < argc) {
      only_shapes = split_list(argv[++n]);
    } else if (std::strcmp(argv[n], "--kvs") == 0 && n + 1 < argc) {
      only_kvs = split_list(argv[++n]);
    } else if (std::strcmp(argv[n], "--repeat") == 0 && n + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++n]));
    } else if (std::strcmp(argv[n], "--wide") == 0) {
      wide = true;
    } else if (std::strcmp(argv[n], "--dim") == 0 && n + 1 < argc) {
      dim = std::atoi(argv[++n]);
    } else if (std::strcmp(argv[n], "--timeline") == 0 && n + 1 < argc) {
      g_timeline_csv = argv[++n];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--json PATH] [--quick] [--shapes A,B] [--kvs X,Y] [--repeat N] "
                   "[--dim 64|128|192|256] [--wide] [--timeline CSV]\n",
                   argv[0]);
      return 2;
    }
  }
  if (dim != 64 && dim != 128 && dim != 192 && dim != 256) {
    std::fprintf(stderr, "--dim: 64, 128, 192 (Dqk 192, Dv 128) or 256\n");
    return 2;
  }
  if (!timeline_available(g_timeline_csv)) return 2;
  if (g_timeline_csv != nullptr && only_shapes.empty() && only_kvs.empty()) {
    std::fprintf(stderr, "--timeline: only with focused rows (--shapes / --kvs)\n");
    return 2;
  }
  const bool focused = !only_shapes.empty() || !only_kvs.empty() || dim != 128 || wide;
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
  const mxattn::DType kvs[] = {mxattn::DType::bf16, mxattn::DType::f16,  mxattn::DType::e4m3,
                               mxattn::DType::e5m2, mxattn::DType::e2m3, mxattn::DType::e3m2,
                               mxattn::DType::e2m1};
  std::vector<Result> results;
  if (focused) {
    const auto chosen = [](const std::vector<std::string>& wanted, const std::string& name,
                           bool substring) {
      if (wanted.empty()) return true;
      for (const std::string& w : wanted)
        if (substring ? name.find(w) != std::string::npos : name == w) return true;
      return false;
    };
    for (int r = 0; r < repeat; ++r)
      for (const Shape& s : shapes)
        for (mxattn::DType kv : kvs)
          if (chosen(only_shapes, s.name, true) &&
              chosen(only_kvs, std::string(mxattn::name_of(kv)), false))
            results.push_back(run_shape(s, kv, 0, stream, reps, 0, 0, wide));
  }
  for (const Shape& s : shapes) {
    if (focused) break;
    for (mxattn::DType kv : kvs) results.push_back(run_shape(s, kv, 0, stream, reps));
    // The general MX kernel beside the narrow one the engine picks here (same partition).
    for (mxattn::DType kv :
         {mxattn::DType::e4m3, mxattn::DType::e5m2, mxattn::DType::e2m3, mxattn::DType::e2m1})
      results.push_back(run_shape(s, kv, 0, stream, reps, 0, 0, true));
    // The large shapes: bf16 with CTAs computing 1, 2 or 4 splits each beside the engine's choice
    // (same partition, same result bits), and bf16 and MXFP8 with longer splits (32 key tiles, a
    // different partition) for comparison: what each split's fixed costs take.
    if (s.batch * s.heads_kv * s.keys <= 262144) {
      // The small graphs are latency-bound: every other key tile (so split length and CTA
      // count) beside the engine's choice, bf16 and MXFP8, and half the default split length.
      for (mxattn::DType kv : {mxattn::DType::bf16, mxattn::DType::e4m3}) {
        for (int64_t tile_n : {16, 32, 64, 128}) {
          if (tile_n != mxattn::cuda::default_tile_n(s.keys))
            results.push_back(run_shape(s, kv, tile_n, stream, reps));
        }
        results.push_back(run_shape(s, kv, 0, stream, reps, 4));
      }
      continue;
    }
    for (int32_t per_cta : {1, 2, 4}) {
      results.push_back(run_shape(s, mxattn::DType::bf16, 0, stream, reps, 0, per_cta));
    }
    for (mxattn::DType kv : {mxattn::DType::bf16, mxattn::DType::e4m3}) {
      results.push_back(run_shape(s, kv, 0, stream, reps, 32));
    }
  }

  // The combine kernel on bytes of its own large enough that its launch does not set its time
  // (the decode shapes give it 0.5-4 MB): 16 query rows a sequence (speculative decoding), 64
  // sequences of 32k keys, 32 splits of every row, 0.54 GB of f32 partials.
  if (!focused)
    results.push_back(run_shape({"B64_H32_K8_Sq16_S32k_combine", 64, 32, 8, 32768, 16},
                                mxattn::DType::bf16, 0, stream, reps));

  std::printf("device: %s, %d SMs; read-only probe over 2 GiB: %.0f GB/s\n", prop.name,
              prop.multiProcessorCount, probe);
  std::printf("%-22s %-10s %7s %6s %6s %10s %9s %7s %7s %11s %9s\n", "shape", "kv", "tile_n",
              "t/spl", "s/cta", "time_us", "GB/s", "%probe", "CTAs", "combine_us", "comb_GB/s");
  for (const Result& r : results) {
    char target[24] = "auto", per_cta[24] = "auto";
    if (r.tiles_per_split > 0) {
      std::snprintf(target, sizeof target, "%lld", static_cast<long long>(r.tiles_per_split));
    }
    if (r.splits_per_cta > 0) std::snprintf(per_cta, sizeof per_cta, "%d", r.splits_per_cta);
    const std::string kv = r.kv + (r.wide_mx ? " wide" : "");
    std::printf("%-22s %-10s %6lld%s %6s %6s %10.2f %9.0f %6.1f%% %7lld %11.2f %9.0f\n",
                r.shape.c_str(), kv.c_str(), static_cast<long long>(r.tile_n),
                r.default_tile ? "*" : " ", target, per_cta, r.us, r.gbps, 100.0 * r.gbps / probe,
                static_cast<long long>(r.ctas), r.combine_us, r.combine_gbps);
  }
  std::printf(
      "(* the engine's own tile_n, mxattn::cuda::default_tile_n; t/spl: key tiles per split of "
      "the auto split; s/cta: splits a CTA computes; auto: the engine's choice; wide: the general "
      "MX kernel where the engine picks the narrow one)\n");

  FILE* f = std::fopen(json_path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 1;
  }
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"probe_gbps\": %.1f,\n  \"results\": [\n",
               prop.name, probe);
  for (size_t n = 0; n < results.size(); ++n) {
    const Result& r = results[n];
    std::fprintf(
        f,
        "    {\"shape\": \"%s\", \"kv\": \"%s\", \"tile_n\": %lld, \"default_tile\": %s, "
        "\"tiles_per_split\": %lld, \"splits_per_cta\": %d, \"wide_mx\": %s, \"us\": %.3f, "
        "\"kv_bytes\": %.0f, \"gbps\": %.1f, \"ctas\": %lld, \"combines\": %s, "
        "\"combine_us\": %.3f, \"combine_gbps\": %.1f}%s\n",
        r.shape.c_str(), r.kv.c_str(), static_cast<long long>(r.tile_n),
        r.default_tile ? "true" : "false", static_cast<long long>(r.tiles_per_split),
        r.splits_per_cta, r.wide_mx ? "true" : "false", r.us, r.kv_bytes, r.gbps,
        static_cast<long long>(r.ctas), r.combines ? "true" : "false", r.combine_us, r.combine_gbps,
        n + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
