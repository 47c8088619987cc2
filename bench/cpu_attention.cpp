// The fast CPU engine against this machine's own ceilings: the f32 FMA peak (the clock a chain of
// dependent FMAs runs at, times the 512-bit FMAs a core issues per cycle) for prefill, and the
// bandwidth of a streaming read for decode. Attention runs through the public API
// (mxattn::attention with Engine::cpu_fast), as a user's code calls it; the kernel set is the
// library's choice (MXATTN_CPU_ISA, read once per process, overrides it). Prints a table and, with
// --json FILE, writes the same numbers as JSON. The decode cases' runs alternate (bf16, E4M3,
// bf16, ...), each followed by a streaming read, so that the share of the read and MXFP8's speed
// over bf16 also come from runs made at the same moment: a shared host's bandwidth moves by up to
// 2x within minutes.
//
//   mxattn_bench_cpu [--threads N] [--reps N] [--case TEXT] [--decode-keys N]
//                    [--kv bf16,e4m3,...] [--kv-layout bshd,bhsd] [--json FILE]
//
// --kv-layout bhsd stores the decode caches head-major ([B, Hkv, S, D] as PyTorch's SDPA takes
// them, and scales [B, Hkv, S, D/32]) and passes them as the strided [B, S, Hkv, D] view; with
// both layouts the cases of each run alternate and MXFP8's speed over bf16 is printed per layout.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench_util.h"
#include "cli.h"
#include "mxattn/attention.h"
#include "mxattn/mx.h"
#include "workload/problem.h"

namespace {

using mxattn::DType;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- Ceilings ----

// Dependent FMAs retire one per FMA latency (4 cycles on every AVX-512 core since Skylake-SP),
// so a chain of them measures the clock the FMA units run at under this load.
constexpr double kFmaLatencyCycles = 4.0;
constexpr int64_t kChainLength = 200'000'000;

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) double fma_chain_seconds() {
  __m256 x = _mm256_set1_ps(1.0f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < kChainLength; ++i) x = _mm256_fmadd_ps(x, a, b);
  const double t = seconds_since(t0);
  volatile float sink = _mm256_cvtss_f32(x);
  (void)sink;
  return t;
}

// Twelve independent chains of 512-bit FMAs: enough to fill both FMA pipes. Named variables, not
// an array, so the empty asm keeps them in registers instead of forcing stores.
__attribute__((target("avx512f"))) double fma_throughput_flops(int64_t iterations) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  __m512 x0 = b, x1 = b, x2 = b, x3 = b, x4 = b, x5 = b, x6 = b, x7 = b, x8 = b, x9 = b, x10 = b,
         x11 = b;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    x0 = _mm512_fmadd_ps(x0, a, b);
    x1 = _mm512_fmadd_ps(x1, a, b);
    x2 = _mm512_fmadd_ps(x2, a, b);
    x3 = _mm512_fmadd_ps(x3, a, b);
    x4 = _mm512_fmadd_ps(x4, a, b);
    x5 = _mm512_fmadd_ps(x5, a, b);
    x6 = _mm512_fmadd_ps(x6, a, b);
    x7 = _mm512_fmadd_ps(x7, a, b);
    x8 = _mm512_fmadd_ps(x8, a, b);
    x9 = _mm512_fmadd_ps(x9, a, b);
    x10 = _mm512_fmadd_ps(x10, a, b);
    x11 = _mm512_fmadd_ps(x11, a, b);
    __asm__ volatile(""
                     : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(x6),
                       "+v"(x7), "+v"(x8), "+v"(x9), "+v"(x10), "+v"(x11));
  }
  const double t = seconds_since(t0);
  volatile float sink = _mm512_cvtss_f32(x0);
  (void)sink;
  return double(iterations) * 12 * 16 * 2 / t;
}
#endif

// The sum of words [0, n), read front to back with the line 8 KiB ahead fetched into L2, in the
// widest vectors the CPU has. Without the fetch ahead a core keeps too few lines in flight: on the
// development machine (Intel model 207 VM, 2 threads) a plain loop read 17 GB/s, this one 24-27.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
uint64_t
sum_words(const uint64_t* words, int64_t n) {
  uint64_t sums[8] = {};
  for (int64_t i = 0; i < n; i += 8) {
    __builtin_prefetch(words + i + 1024, 0, 2);  // a hint: past the end it reads nothing
    for (int k = 0; k < 8; ++k) sums[k] += words[i + k];
  }
  uint64_t total = 0;
  for (const uint64_t s : sums) total += s;
  return total;
}

// A streaming read of 1 GiB, larger than any cache, by every thread at once (each its own
// contiguous share): the bandwidth ceiling of decode, measured once for the header and again
// beside every decode run (this machine's bandwidth moves by up to 2x within minutes, so a ratio
// to a read made minutes earlier says little).
class StreamRead {
 public:
  explicit StreamRead(int threads) : threads_(threads), buffer_(new uint64_t[size_t(kWords)]) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < kWords; ++i) buffer_[size_t(i)] = uint64_t(i);
  }
  int64_t bytes() const {
    return kWords * 8;
  }
  // One pass; GB/s.
  double gbs() const {
    uint64_t total = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads_) reduction(+ : total)
    {
      const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      // Shares of whole 64-byte lines.
      const int64_t first = kWords / 8 * t / n * 8, last = kWords / 8 * (t + 1) / n * 8;
      total += sum_words(buffer_.get() + first, last - first);
    }
    const double t = seconds_since(t0);
    volatile uint64_t sink = total;
    (void)sink;
    return double(bytes()) / t / 1e9;
  }

 private:
  static constexpr int64_t kWords = (int64_t(1) << 30) / 8;
  int threads_;
  std::unique_ptr<uint64_t[]> buffer_;
};

struct Ceilings {
  int threads = 0;
  double clock_ghz = 0;
  int fma_units = 2;
  int lanes = 16;
  double peak_gflops = 0;      // threads x units x lanes x 2 x clock
  double measured_gflops = 0;  // the 512-bit FMA loop on every thread
  double stream_gbs = 0;
  int64_t stream_bytes = 0;
};

Ceilings measure_ceilings(int threads, const StreamRead& read) {
  Ceilings c;
  c.threads = threads;
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f");
  c.lanes = avx512 ? 16 : 8;
  double clock_sum = 0, flops = 0;
#pragma omp parallel num_threads(threads) reduction(+ : clock_sum, flops)
  {
    // The throughput loop first also brings the cores up to their sustained clock; the chain is
    // then timed three times and the fastest run counts.
    if (avx512) flops += fma_throughput_flops(100'000'000);
#pragma omp barrier
    double fastest = fma_chain_seconds();
    for (int rep = 0; rep < 2; ++rep) fastest = std::min(fastest, fma_chain_seconds());
    clock_sum += kFmaLatencyCycles * double(kChainLength) / fastest / 1e9;
  }
  c.clock_ghz = clock_sum / threads;
  c.measured_gflops = flops / 1e9;
  // 512-bit FMAs a core issues per cycle, from the throughput loop: 2 where two 512-bit FMA
  // ports exist, 1 where a 512-bit FMA takes both 256-bit FMA pipes for a cycle (Zen 4), whose f32
  // peak is then half the two-port formula's.
  if (avx512 && c.clock_ghz > 0) {
    const double per_cycle = c.measured_gflops / (threads * c.lanes * 2 * c.clock_ghz);
    c.fma_units = std::max(1, int(std::lround(per_cycle)));
  }
#endif
  c.peak_gflops = threads * c.fma_units * c.lanes * 2 * c.clock_ghz;

  // The streaming read's best of five.
  c.stream_bytes = read.bytes();
  for (int rep = 0; rep < 5; ++rep) c.stream_gbs = std::max(c.stream_gbs, read.gbs());
  return c;
}

// ---- Problems ----

using mxattn::bench::HostTensor;
using mxattn::bench::Json;

struct Case {
  std::string name;
  std::string kind;  // "prefill" (compute-bound) or "decode" (memory-bound)
  int64_t batch = 1, seq_q = 0, seq_k = 0, heads_q = 0, heads_kv = 0, dim = 128;
  DType q_type = DType::f32, kv_type = DType::f32;
  mxattn::Causal causal = mxattn::Causal::none;
  // The KV cache stored head-major ([B, Hkv, S, D], as PyTorch's SDPA takes it, and its scales
  // [B, Hkv, S, D/32]), passed to the engine as the strided [B, S, Hkv, D] view of it.
  bool head_major = false;
};

// The names --kv-layout takes, which the tables and the JSON also use.
constexpr const char* kLayoutNames[] = {"bshd", "bhsd"};
const char* layout_name(bool head_major) {
  return kLayoutNames[head_major ? 1 : 0];
}

std::string dtype_name(DType t) {
  return std::string(mxattn::name_of(t));
}

// One KV cache (and its MX scales) of a case: the problem's views, or the same views over copies
// of their bytes.
struct KvCache {
  mxattn::TensorView k, v, k_scales, v_scales;
  std::vector<HostTensor> copies;
};

// Another copy of a cache, at other addresses: what the timing needs of the copies that keep
// every call reading memory, in a fraction of the time drawing new values took.
KvCache copy_of(const KvCache& kv) {
  KvCache out;
  const auto copy = [&out](mxattn::TensorView v) {
    if (!v.given()) return v;
    out.copies.emplace_back(DType::e8m0, std::initializer_list<int64_t>{v.bytes});
    std::memcpy(out.copies.back().view().data, v.data, size_t(v.bytes));
    v.data = out.copies.back().view().data;
    return v;
  };
  out.k = copy(kv.k);
  out.v = copy(kv.v);
  out.k_scales = copy(kv.k_scales);
  out.v_scales = copy(kv.v_scales);
  return out;
}

int64_t cache_bytes(const KvCache& kv) {
  return kv.k.bytes + kv.v.bytes + kv.k_scales.bytes + kv.v_scales.bytes;
}

// Query-key pairs that are visible (causal counts the lower triangle of a square problem).
double visible_pairs(const Case& c) {
  const double rows = double(c.batch * c.heads_q);
  if (c.causal == mxattn::Causal::none) return rows * double(c.seq_q) * double(c.seq_k);
  double pairs = 0;
  for (int64_t i = 0; i < c.seq_q; ++i) pairs += double(std::min(c.seq_k, i + 1));
  return rows * pairs;
}

struct Result {
  Case c;
  double best_ms = 0, median_ms = 0;
  double gflops = 0, gbs = 0;
  double percent_of_ceiling = 0;
  int64_t bytes = 0;
  // Decode: each run beside a streaming read made right after it; the medians over the runs of
  // that read and of the run's share of it.
  double read_gbs_beside = 0, percent_of_read_beside = 0;
  std::vector<double> run_ms;  // in the order run, the warm-up left out
};

using mxattn::bench::median;

// One case ready to run: its inputs (random N(0, 1), from the workload generator) and, for
// decode, enough copies of the KV cache that every call reads memory, not a cache left warm by
// the previous one.
class Runner {
 public:
  Runner(const Case& c, int threads) : c_(c), threads_(threads) {
    mxattn::workload::Spec spec;
    spec.batch = c.batch;
    spec.seq_q = c.seq_q;
    spec.seq_k = c.seq_k;
    spec.heads_q = c.heads_q;
    spec.heads_kv = c.heads_kv;
    spec.dim_qk = spec.dim_v = c.dim;
    spec.q_type = c.q_type;
    spec.k_type = spec.v_type = c.kv_type;
    spec.o_type = c.q_type == DType::f32 ? DType::f32 : DType::bf16;
    spec.causal = c.causal;
    spec.lse = false;
    spec.split_kv = mxattn::AttentionArgs{}.split.split_kv;  // what a caller gets by default
    spec.kv_head_major = c.head_major;
    if (mxattn::Status st = mxattn::workload::Problem::build(spec, &problem_); !st) {
      std::fprintf(stderr, "mxattn_bench_cpu: %s: %s\n", c.name.c_str(), st.message().c_str());
      std::exit(1);
    }
    const mxattn::AttentionArgs& a = problem_.args();
    caches_.push_back({a.k, a.v, a.k_scales, a.v_scales, {}});
    const int64_t one = cache_bytes(caches_[0]);
    if (c.kind == "decode") {
      while (int64_t(caches_.size()) * one < (int64_t(1) << 30)) {
        caches_.push_back(copy_of(caches_[0]));
      }
    }
    bytes_ = one + a.q.bytes + a.o.bytes;
  }

  const Case& c() const { return c_; }
  int64_t bytes() const { return bytes_; }

  // Call number `call` (the caches taken in turn); ms, validation included.
  double run_ms(int call) const {
    const KvCache& kv = caches_[size_t(call) % caches_.size()];
    mxattn::AttentionArgs args = problem_.args();
    args.k = kv.k;
    args.v = kv.v;
    args.k_scales = kv.k_scales;
    args.v_scales = kv.v_scales;
    const auto t0 = Clock::now();
    const mxattn::Status st =
        mxattn::attention(args, mxattn::RunOptions{mxattn::Engine::cpu_fast, threads_});
    const double ms = seconds_since(t0) * 1e3;
    if (!st) {
      std::fprintf(stderr, "mxattn_bench_cpu: %s: %s\n", c_.name.c_str(), st.message().c_str());
      std::exit(1);
    }
    return ms;
  }

 private:
  Case c_;
  int threads_;
  mxattn::workload::Problem problem_;
  std::vector<KvCache> caches_;
  int64_t bytes_ = 0;
};

// A case's result from its runs (`ms`, in order) and, for decode, the streaming reads made right
// after each (`reads`, GB/s; empty otherwise).
Result summarize(const Runner& run, const std::vector<double>& ms, const std::vector<double>& reads,
                 const Ceilings& ceilings) {
  const Case& c = run.c();
  Result r;
  r.c = c;
  r.run_ms = ms;
  r.best_ms = *std::min_element(ms.begin(), ms.end());
  r.median_ms = median(ms);
  const double flops = 4.0 * visible_pairs(c) * double(c.dim);
  r.bytes = run.bytes();
  r.gflops = flops / (r.best_ms * 1e-3) / 1e9;
  r.gbs = double(r.bytes) / (r.best_ms * 1e-3) / 1e9;
  r.percent_of_ceiling = c.kind == "prefill" ? 100.0 * r.gflops / ceilings.peak_gflops
                                             : 100.0 * r.gbs / ceilings.stream_gbs;
  if (!reads.empty()) {
    std::vector<double> shares;
    for (size_t i = 0; i < ms.size(); ++i) {
      shares.push_back(100.0 * double(r.bytes) / (ms[i] * 1e-3) / 1e9 / reads[i]);
    }
    r.read_gbs_beside = median(reads);
    r.percent_of_read_beside = median(shares);
  }
  return r;
}

// MXFP8 decode's speed over bf16's in one KV layout: from the best times, and the median over runs
// made one after the other of their time ratios.
struct Speedup {
  std::string layout;
  double best = 0, alternated = 0;
};

Json to_json(const Ceilings& ce, const std::vector<Result>& results,
             const std::vector<Speedup>& speedups) {
  const char* isa = std::getenv("MXATTN_CPU_ISA");
  Json j = {{"engine", "mxattn cpu_fast"},
            {"cpu_isa_env", isa != nullptr ? Json(isa) : Json(nullptr)},
            {"threads", ce.threads},
            {"ceilings",
             {{"clock_ghz", ce.clock_ghz},
              {"fma_units", ce.fma_units},
              {"lanes", ce.lanes},
              {"peak_gflops", ce.peak_gflops},
              {"measured_fma_gflops", ce.measured_gflops},
              {"stream_read_gbs", ce.stream_gbs},
              {"stream_bytes", ce.stream_bytes}}}};
  // The first layout's speedup at the top level, every layout's by name.
  j["mxfp8_over_bf16_decode_speedup"] = speedups.empty() ? Json(nullptr) : Json(speedups[0].best);
  j["mxfp8_over_bf16_decode_speedup_alternated"] =
      speedups.empty() ? Json(nullptr) : Json(speedups[0].alternated);
  Json by_layout = Json::object();
  for (const Speedup& s : speedups) {
    by_layout[s.layout] = {{"best", s.best}, {"alternated", s.alternated}};
  }
  j["mxfp8_over_bf16_decode_speedup_by_layout"] = by_layout;
  Json cases = Json::array();
  for (const Result& r : results) {
    const bool decode = r.c.kind == "decode";
    cases.push_back(
        {{"name", r.c.name},
         {"kind", r.c.kind},
         {"batch", r.c.batch},
         {"seq_q", r.c.seq_q},
         {"seq_k", r.c.seq_k},
         {"heads_q", r.c.heads_q},
         {"heads_kv", r.c.heads_kv},
         {"dim", r.c.dim},
         {"q_type", dtype_name(r.c.q_type)},
         {"kv_type", dtype_name(r.c.kv_type)},
         {"causal", r.c.causal == mxattn::Causal::none ? "none" : "top_left"},
         {"kv_layout", layout_name(r.c.head_major)},
         {"best_ms", r.best_ms},
         {"median_ms", r.median_ms},
         {"run_ms", r.run_ms},
         {"gflops", r.gflops},
         {"gbs", r.gbs},
         {"bytes", r.bytes},
         {"percent_of_ceiling", r.percent_of_ceiling},
         {"read_gbs_beside", decode ? Json(r.read_gbs_beside) : Json(nullptr)},
         {"percent_of_read_beside", decode ? Json(r.percent_of_read_beside) : Json(nullptr)}});
  }
  j["cases"] = cases;
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kProgram = "mxattn_bench_cpu";
  int64_t threads = 2, reps = 5, decode_keys = 32768;
  std::string json_path, only, kv_text = "bf16,e4m3", layout_text = kLayoutNames[0];
  mxattn::tools::FlagParser flags = mxattn::tools::FlagParser::for_program(
      kProgram, "[flags]",
      "The fast CPU engine's prefill and decode against this machine's FMA peak and streaming\n"
      "read, through mxattn::attention (Engine::cpu_fast).");
  flags.add_int("threads", &threads, "CPU threads of the engine and of the ceilings");
  flags.add_int("reps", &reps, "timed runs of each case after one warm-up");
  flags.add_string("case", &only, "TEXT", "run only the cases whose name contains TEXT");
  flags.add_int("decode-keys", &decode_keys, "cached keys of the decode cases");
  flags.add_string("kv", &kv_text, "T,T,...",
                   "K/V types of the decode cases: f32, f16, bf16 or MX (e4m3, e2m1, ...)");
  flags.add_string("kv-layout", &layout_text, "L,L",
                   "decode caches stored bshd ([B, S, Hkv, D]) or bhsd (head-major, as PyTorch's "
                   "SDPA takes them); both: the runs alternated, MXFP8 over bf16 per layout");
  flags.add_string("json", &json_path, "FILE", "also write the results here as JSON");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (threads < 1) return flags.usage_error("--threads must be at least 1");
  if (reps < 1) return flags.usage_error("--reps must be at least 1");
  if (decode_keys < 1) return flags.usage_error("--decode-keys must be at least 1");
  std::vector<DType> decode_kv;
  const auto kv_type = [](DType t) { return mxattn::is_plain_float(t) || mxattn::is_mx(t); };
  if (auto problem =
          mxattn::bench::parse_dtypes("kv", kv_text, kv_type, "f32, f16, bf16 or MX", &decode_kv)) {
    return flags.usage_error(*problem);
  }
  std::vector<bool> layouts;  // head-major or not
  for (const std::string& name : mxattn::bench::split_list(layout_text)) {
    if (name != kLayoutNames[0] && name != kLayoutNames[1]) {
      return flags.usage_error("--kv-layout: '" + name + "' is not bshd or bhsd");
    }
    layouts.push_back(name == kLayoutNames[1]);
  }
  if (layouts.empty()) return flags.usage_error("--kv-layout: give bshd, bhsd or both");
  if (!json_path.empty() && !mxattn::bench::json_writable(kProgram, json_path)) return 1;

  const int nthreads = int(threads);
  const StreamRead read(nthreads);  // for the ceiling, and beside each decode run
  const Ceilings ce = measure_ceilings(nthreads, read);
  const char* isa = std::getenv("MXATTN_CPU_ISA");
  std::printf("mxattn cpu_fast benchmark: %d threads, kernels %s, best of %lld runs\n", nthreads,
              isa != nullptr ? isa : "of the library's choice", static_cast<long long>(reps));
  std::printf(
      "FMA peak  = %d threads x %d FMA/cycle x %d lanes x 2 flop x %.2f GHz = %.1f GFLOP/s"
      "  (clock from a chain of dependent FMAs, %g cycles each; FMAs a cycle from a loop of\n"
      "            independent 512-bit FMAs, which reaches %.1f GFLOP/s)\n",
      nthreads, ce.fma_units, ce.lanes, ce.clock_ghz, ce.peak_gflops, kFmaLatencyCycles,
      ce.measured_gflops);
  std::printf("Bandwidth = %.1f GB/s  (streaming read of %lld MiB by %d threads)\n\n",
              ce.stream_gbs, static_cast<long long>(ce.stream_bytes >> 20), nthreads);

  using mxattn::Causal;
  std::vector<Case> cases;
  for (DType t : {DType::f32, DType::bf16}) {
    for (Causal causal : {Causal::none, Causal::top_left}) {
      Case c;
      c.name = "prefill " + dtype_name(t) + (causal == Causal::none ? "" : " causal");
      c.kind = "prefill";
      c.seq_q = c.seq_k = 2048;
      c.heads_q = c.heads_kv = 8;
      c.q_type = c.kv_type = t;
      c.causal = causal;
      cases.push_back(c);
    }
  }
  for (const bool head_major : layouts) {
    for (DType t : decode_kv) {
      Case c;
      c.name = "decode " + (t == DType::e4m3 ? std::string("mxfp8-e4m3") : dtype_name(t)) + " kv" +
               (layouts.size() > 1 || head_major ? " " + std::string(layout_name(head_major)) : "");
      c.head_major = head_major;
      c.kind = "decode";
      c.seq_q = 1;
      c.seq_k = decode_keys;
      c.heads_q = 32;
      c.heads_kv = 8;
      c.q_type = DType::bf16;
      c.kv_type = t;
      cases.push_back(c);
    }
  }

  std::printf("%-36s %6s %6s %6s %5s %4s %9s %9s %9s %9s %10s\n", "case", "B", "Sq", "Sk", "Hq",
              "Hkv", "best ms", "median ms", "GFLOP/s", "GB/s", "% ceiling");
  std::vector<Result> results;
  const auto print_row = [&](const Result& r) {
    const Case& c = r.c;
    std::printf("%-36s %6lld %6lld %6lld %5lld %4lld %9.2f %9.2f %9.1f %9.2f %9.1f%% %s\n",
                c.name.c_str(), static_cast<long long>(c.batch), static_cast<long long>(c.seq_q),
                static_cast<long long>(c.seq_k), static_cast<long long>(c.heads_q),
                static_cast<long long>(c.heads_kv), r.best_ms, r.median_ms, r.gflops, r.gbs,
                r.percent_of_ceiling, c.kind == "prefill" ? "of FMA peak" : "of bandwidth");
  };
  // Prefill: each case's runs one after another, the first a warm-up.
  std::vector<std::unique_ptr<Runner>> decode;
  for (const Case& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    if (c.kind == "decode") {
      decode.push_back(std::make_unique<Runner>(c, nthreads));
      continue;
    }
    const Runner run(c, nthreads);
    std::vector<double> ms;
    for (int call = 0; call <= reps; ++call) {
      const double t = run.run_ms(call);
      if (call > 0) ms.push_back(t);
    }
    results.push_back(summarize(run, ms, {}, ce));
    print_row(results.back());
  }
  // Decode: the cases' runs alternated (bf16, E4M3, bf16, ...) so that the machine's drift falls
  // on every case alike, each run followed by a streaming read.
  std::vector<std::vector<double>> ms(decode.size()), reads(decode.size());
  for (int call = 0; call <= reps; ++call) {
    for (size_t i = 0; i < decode.size(); ++i) {
      const double t = decode[i]->run_ms(call);
      const double gbs = read.gbs();
      if (call == 0) continue;  // warm-up
      ms[i].push_back(t);
      reads[i].push_back(gbs);
    }
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    results.push_back(summarize(*decode[i], ms[i], reads[i], ce));
    print_row(results.back());
  }
  if (!decode.empty()) {
    std::printf("\nDecode beside a streaming read made right after each run (median of %lld):\n",
                static_cast<long long>(reps));
    for (const Result& r : results) {
      if (r.c.kind != "decode") continue;
      std::printf("%-36s %5.1f%% of the read (read %.1f GB/s)\n", r.c.name.c_str(),
                  r.percent_of_read_beside, r.read_gbs_beside);
    }
  }
  // MXFP8 over bf16 per KV layout.
  std::vector<Speedup> speedups;
  for (const bool head_major : layouts) {
    const Result* bf16 = nullptr;
    const Result* fp8 = nullptr;
    for (const Result& r : results) {
      if (r.c.kind != "decode" || r.c.head_major != head_major) continue;
      if (r.c.kv_type == DType::bf16) bf16 = &r;
      if (r.c.kv_type == DType::e4m3) fp8 = &r;
    }
    if (bf16 == nullptr || fp8 == nullptr) continue;
    Speedup s;
    s.layout = layout_name(head_major);
    s.best = bf16->best_ms / fp8->best_ms;
    std::vector<double> ratios;
    for (size_t i = 0; i < bf16->run_ms.size(); ++i) {
      ratios.push_back(bf16->run_ms[i] / fp8->run_ms[i]);
    }
    s.alternated = median(ratios);
    speedups.push_back(s);
    std::printf(
        "\nMXFP8 decode is %.2fx faster than bf16 decode%s%s (best times; %.2fx, the median of the "
        "ratios of runs made one after the other)\n",
        s.best, layouts.size() > 1 ? ", " : "", layouts.size() > 1 ? s.layout.c_str() : "",
        s.alternated);
  }
  if (!json_path.empty() &&
      !mxattn::bench::write_json(kProgram, json_path, to_json(ce, results, speedups))) {
    return 1;
  }
  return 0;
}
