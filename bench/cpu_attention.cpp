// The fast CPU engine against this machine's own ceilings: the f32 FMA peak (the clock a chain of
// dependent FMAs runs at, times the 512-bit FMAs a core issues per cycle) for prefill, and the
// bandwidth of a streaming read for decode. Prints a table and, with --json FILE, writes the same
// numbers as JSON. The decode cases' runs alternate (bf16, E4M3, bf16, ...), each followed by a
// streaming read, so that the share of the read and MXFP8's speed over bf16 also come from runs
// made at the same moment: this machine's bandwidth moves by up to 2x within minutes.
//
//   mxattn_bench_cpu [--threads N] [--reps N]
//                    [--isa portable|avx2|avx512|avx512_vbmi|avx512_bf16|avx512_amx|
//                           avx512_amx_emulated]
//                    [--case TEXT] [--decode-keys N] [--kv bf16,e4m3,...]
//                    [--kv-layout bshd,bhsd] [--row-tiles none,bf16,all]
//                    [--sources memory,cache | --hot] [--json FILE]
// --case runs only the cases whose name contains TEXT. --row-tiles runs each decode case once per
// MXATTN_CPU_ROW_TILES mode (src/cpu/fast.h), alternated run by run within this one process, and
// prints the median ratio of each mode's runs to the first mode's runs made beside them.
// --kv-layout bhsd stores the decode caches head-major ([B, Hkv, S, D] and scales
// [B, Hkv, S, D/32]) and passes them as the strided [B, S, Hkv, D] view; with both layouts the
// cases of each run alternated and MXFP8's speed over bf16 is printed per layout.
// --sources memory,cache runs each decode case from memory (a new copy of its KV cache every call,
// 1 GiB of copies in all) and from the caches (one copy read every call), alternated within this
// process, so that both are timed at the same moment; --hot is --sources cache.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/float16.h"
#include "base/host_tensor.h"
#include "core/plan.h"
#include "core/problem.h"
#include "api/engines.h"
#include "cpu/engines.h"
#include "cpu/fast.h"
#include "mxattn/attention.h"
#include "mxattn/mx.h"

namespace {

using mxattn::DType;
using mxattn::base::HostTensor;
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

std::mt19937 rng(2024);

// A contiguous tensor of `dtype` holding N(0, 1) values.
HostTensor random_tensor(DType dtype, std::initializer_list<int64_t> shape) {
  HostTensor t(dtype, shape);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) mxattn::base::store_float(t.view(), i, normal(rng));
  return t;
}

struct Case {
  std::string name;
  std::string kind;  // "prefill" (compute-bound) or "decode" (memory-bound)
  int64_t batch = 1, seq_q = 0, seq_k = 0, heads_q = 0, heads_kv = 0, dim = 128;
  DType q_type = DType::f32, kv_type = DType::f32;
  mxattn::Causal causal = mxattn::Causal::none;
  // Decode with --row-tiles: MXATTN_CPU_ROW_TILES for this case's runs (empty: left as it is).
  std::string row_tiles;
  // Decode: the KV cache stored head-major ([B, Hkv, S, D], as PyTorch's SDPA takes it, and its
  // scales [B, Hkv, S, D/32]), passed to the engine as the strided [B, S, Hkv, D] view of it.
  bool head_major = false;
  // Decode: one KV cache read every call, from the caches where it fits, instead of a new copy
  // from memory.
  bool hot = false;
};

// The names --kv-layout and --sources take, which the tables and the JSON also use.
const char* layout_name(bool head_major) {
  return head_major ? "bhsd" : "bshd";
}
const char* source_name(bool hot) {
  return hot ? "cache" : "memory";
}

// One KV cache (and its MX scales) of a case.
struct KvCache {
  HostTensor k, v, k_scales, v_scales;
};

// Replaces f32 `t` by its MX codes of `dtype`, with E8M0 scales along the head dim.
void quantize_in_place(HostTensor& t, HostTensor& scales, DType dtype) {
  const mxattn::TensorView& v = t.view();
  HostTensor codes(dtype, {v.shape[0], v.shape[1], v.shape[2], v.shape[3]});
  scales = HostTensor(DType::e8m0, {v.shape[0], v.shape[1], v.shape[2], v.shape[3] / 32});
  if (!mxattn::quantize(v, codes.view(), scales.view(), 3, mxattn::ScaleMode::floor)) {
    std::cerr << "quantize failed\n";
    std::exit(1);
  }
  t = std::move(codes);
}

KvCache make_cache(const Case& c) {
  KvCache kv;
  const bool mx = mxattn::is_mx(c.kv_type);
  const int64_t a = c.head_major ? c.heads_kv : c.seq_k, b = c.head_major ? c.seq_k : c.heads_kv;
  kv.k = random_tensor(mx ? DType::f32 : c.kv_type, {c.batch, a, b, c.dim});
  kv.v = random_tensor(mx ? DType::f32 : c.kv_type, {c.batch, a, b, c.dim});
  if (mx) {
    quantize_in_place(kv.k, kv.k_scales, c.kv_type);
    quantize_in_place(kv.v, kv.v_scales, c.kv_type);
  }
  return kv;
}

// A copy of `t` in a buffer of its own (an empty tensor stays empty).
HostTensor copy_of(const HostTensor& t) {
  const mxattn::TensorView& v = t.view();
  if (v.data == nullptr) return HostTensor();
  HostTensor c(v.dtype, std::vector<int64_t>(v.shape, v.shape + v.rank));
  std::memcpy(c.view().data, v.data, size_t(t.bytes()));
  return c;
}

// A cache tensor as the engine's [B, S, Hkv, ...] view: axes 1 and 2 swapped where it is stored
// head-major.
mxattn::TensorView bshd_view(const HostTensor& t, bool head_major) {
  mxattn::TensorView v = t.view();
  if (head_major && v.data != nullptr) {
    std::swap(v.shape[1], v.shape[2]);
    std::swap(v.stride[1], v.stride[2]);
  }
  return v;
}

// Another copy of a cache, at other addresses: what the timing needs of the copies that keep
// every call reading memory, in a fraction of the time drawing new values took.
KvCache copy_of(const KvCache& kv) {
  return {copy_of(kv.k), copy_of(kv.v), copy_of(kv.k_scales), copy_of(kv.v_scales)};
}

int64_t cache_bytes(const KvCache& kv) {
  return kv.k.bytes() + kv.v.bytes() + kv.k_scales.bytes() + kv.v_scales.bytes();
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
  // Decode from memory: each run beside a streaming read made right after it; the medians over
  // the runs of that read and of the run's share of it.
  double read_gbs_beside = 0, percent_of_read_beside = 0;
  std::vector<double> run_ms;  // in the order run, the warm-up left out
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One case ready to run: its inputs and, for decode, enough copies of the KV cache that every call
// reads memory, not a cache left warm by the previous one (one copy where the case is hot).
class Runner {
 public:
  Runner(const Case& c, mxattn::cpu::SimdIsa isa, int threads)
      : c_(c),
        isa_(isa),
        threads_(threads),
        q_(random_tensor(c.q_type, {c.batch, c.seq_q, c.heads_q, c.dim})),
        o_(c.q_type == DType::f32 ? DType::f32 : DType::bf16,
           {c.batch, c.seq_q, c.heads_q, c.dim}) {
    caches_.push_back(make_cache(c));
    const int64_t one = cache_bytes(caches_[0]);
    if (c.kind == "decode" && !c.hot) {
      while (int64_t(caches_.size()) * one < (int64_t(1) << 30)) {
        caches_.push_back(copy_of(caches_[0]));
      }
    }
    bytes_ = one + q_.bytes() + o_.bytes();
  }

  const Case& c() const { return c_; }
  int64_t bytes() const { return bytes_; }

  // Call number `call` (the caches taken in turn); ms, validation and planning included.
  double run_ms(int call) const {
    const KvCache& kv = caches_[size_t(call) % caches_.size()];
    mxattn::AttentionArgs args;
    args.q = q_.view();
    args.k = bshd_view(kv.k, c_.head_major);
    args.v = bshd_view(kv.v, c_.head_major);
    if (mxattn::is_mx(c_.kv_type)) {
      args.k_scales = bshd_view(kv.k_scales, c_.head_major);
      args.v_scales = bshd_view(kv.v_scales, c_.head_major);
    }
    args.o = o_.view();
    args.causal = c_.causal;
    if (!c_.row_tiles.empty()) setenv("MXATTN_CPU_ROW_TILES", c_.row_tiles.c_str(), 1);
    const auto t0 = Clock::now();
    mxattn::core::Problem p;
    if (mxattn::Status st = mxattn::core::validate_problem(args, &p); !st) {
      std::cerr << c_.name << ": " << st.message() << "\n";
      std::exit(1);
    }
    mxattn::cpu::run_fast_with(isa_, p, mxattn::api::split_params(p, mxattn::api::EngineKind::cpu_fast), threads_);
    return seconds_since(t0) * 1e3;
  }

 private:
  Case c_;
  mxattn::cpu::SimdIsa isa_;
  int threads_;
  HostTensor q_, o_;
  std::vector<KvCache> caches_;
  int64_t bytes_ = 0;
};

// A case's result from its runs (`ms`, in order) and, for decode from memory, the streaming reads
// made right after each (`reads`, GB/s; empty otherwise).
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

std::string dtype_name(DType t) {
  return std::string(mxattn::name_of(t));
}

std::string causal_name(mxattn::Causal c) {
  return c == mxattn::Causal::none ? "none" : "top_left";
}

// MXFP8 decode's speed over bf16's: from the best times, and the median over runs made one after
// the other of their time ratios.
struct Speedup {
  double best = 0, alternated = 0;
};

// MXFP8 over bf16 per KV layout ("bshd" or "bhsd"), for one decode source.
using Speedups = std::vector<std::pair<std::string, Speedup>>;

void write_speedups(std::ofstream& out, const Speedups& speedups) {
  out << "{";
  for (size_t i = 0; i < speedups.size(); ++i) {
    out << (i ? ", " : "") << "\"" << speedups[i].first
        << "\": {\"best\": " << speedups[i].second.best
        << ", \"alternated\": " << speedups[i].second.alternated << "}";
  }
  out << "}";
}

// by_source: per decode source ("memory", "cache"), in --sources order, its speedups per layout.
void write_json(const std::string& path, const Ceilings& ce, const std::vector<Result>& results,
                const std::string& isa,
                const std::vector<std::pair<std::string, Speedups>>& by_source) {
  // The first source's speedups per layout in mxfp8_over_bf16_decode_speedup_by_layout, its
  // first layout's at the top level (as before --kv-layout and --sources); every source's in
  // mxfp8_over_bf16_decode_speedup_by_source.
  const Speedups none;
  const Speedups& speedups = by_source.empty() ? none : by_source.front().second;
  const Speedup fp8_speedup = speedups.empty() ? Speedup{} : speedups.front().second;
  const bool hot = !by_source.empty() && by_source.front().first == source_name(true);
  std::ofstream out(path);
  out << "{\n  \"engine\": \"mxattn cpu_fast\",\n  \"isa\": \"" << isa << "\",\n"
      << "  \"threads\": " << ce.threads << ",\n"
      << "  \"hot_decode_cache\": " << (hot ? "true" : "false") << ",\n"
      << "  \"decode_sources\": [";
  for (size_t i = 0; i < by_source.size(); ++i) {
    out << (i ? ", " : "") << "\"" << by_source[i].first << "\"";
  }
  out << "],\n"
      << "  \"ceilings\": {\"clock_ghz\": " << ce.clock_ghz << ", \"fma_units\": " << ce.fma_units
      << ", \"lanes\": " << ce.lanes << ", \"peak_gflops\": " << ce.peak_gflops
      << ", \"measured_fma_gflops\": " << ce.measured_gflops
      << ", \"stream_read_gbs\": " << ce.stream_gbs << ", \"stream_bytes\": " << ce.stream_bytes
      << "},\n  \"mxfp8_over_bf16_decode_speedup\": " << fp8_speedup.best
      << ",\n  \"mxfp8_over_bf16_decode_speedup_alternated\": " << fp8_speedup.alternated
      << ",\n  \"mxfp8_over_bf16_decode_speedup_by_layout\": ";
  write_speedups(out, speedups);
  out << ",\n  \"mxfp8_over_bf16_decode_speedup_by_source\": {";
  for (size_t i = 0; i < by_source.size(); ++i) {
    out << (i ? ", " : "") << "\"" << by_source[i].first << "\": ";
    write_speedups(out, by_source[i].second);
  }
  out << "},\n  \"cases\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << "    {\"name\": \"" << r.c.name << "\", \"kind\": \"" << r.c.kind
        << "\", \"batch\": " << r.c.batch << ", \"seq_q\": " << r.c.seq_q
        << ", \"seq_k\": " << r.c.seq_k << ", \"heads_q\": " << r.c.heads_q
        << ", \"heads_kv\": " << r.c.heads_kv << ", \"dim\": " << r.c.dim << ", \"q_type\": \""
        << dtype_name(r.c.q_type) << "\", \"kv_type\": \"" << dtype_name(r.c.kv_type)
        << "\", \"causal\": \"" << causal_name(r.c.causal) << "\", \"kv_layout\": \""
        << layout_name(r.c.head_major) << "\", \"source\": \""
        << (r.c.kind == "decode" ? source_name(r.c.hot) : "") << "\", \"best_ms\": " << r.best_ms
        << ", \"median_ms\": " << r.median_ms << ", \"gflops\": " << r.gflops
        << ", \"gbs\": " << r.gbs << ", \"bytes\": " << r.bytes
        << ", \"percent_of_ceiling\": " << r.percent_of_ceiling
        << ", \"read_gbs_beside\": " << r.read_gbs_beside
        << ", \"percent_of_read_beside\": " << r.percent_of_read_beside << "}"
        << (i + 1 < results.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

// A flag's comma-separated list of `first` and `second` (either or both) into `out`, true for
// `second`; false, with a message, for another name or an empty list.
bool parse_choices(const std::string& flag, const std::string& text, const std::string& first,
                   const std::string& second, std::vector<bool>& out) {
  out.clear();
  std::stringstream list(text);
  for (std::string name; std::getline(list, name, ',');) {
    if (name != first && name != second) {
      std::cerr << flag << " " << name << ": not " << first << " or " << second << "\n";
      return false;
    }
    out.push_back(name == second);
  }
  if (out.empty()) {
    std::cerr << flag << ": give " << first << ", " << second << " or both\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  int64_t decode_keys = 32768;
  std::vector<bool> sources = {false};  // decode from the caches or not, per --sources
  std::string json_path, only;
  std::vector<DType> decode_kv = {DType::bf16, DType::e4m3};
  std::vector<std::string> row_tiles = {""};
  std::vector<bool> layouts = {false};  // head-major or not, per --kv-layout
  mxattn::cpu::SimdIsa isa = mxattn::cpu::supported_isas().back();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--reps" && has_value) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--case" && has_value) {
      only = argv[++i];
    } else if (arg == "--decode-keys" && has_value) {
      decode_keys = std::max<int64_t>(1, std::atoll(argv[++i]));
    } else if (arg == "--kv" && has_value) {
      decode_kv.clear();
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) {
        const std::optional<DType> t = mxattn::parse_dtype(name);
        if (!t ||
            !(*t == DType::f32 || *t == DType::f16 || *t == DType::bf16 || mxattn::is_mx(*t))) {
          std::cerr << "--kv " << name << ": not f32, f16, bf16 or an MX type\n";
          return 2;
        }
        decode_kv.push_back(*t);
      }
    } else if (arg == "--row-tiles" && has_value) {
      row_tiles.clear();
      std::stringstream list(argv[++i]);
      for (std::string mode; std::getline(list, mode, ',');) {
        if (mode != "none" && mode != "bf16" && mode != "all") {
          std::cerr << "--row-tiles " << mode << ": not none, bf16 or all\n";
          return 2;
        }
        row_tiles.push_back(mode);
      }
    } else if (arg == "--kv-layout" && has_value) {
      if (!parse_choices(arg, argv[++i], layout_name(false), layout_name(true), layouts)) return 2;
    } else if (arg == "--hot") {
      sources = {true};
    } else if (arg == "--sources" && has_value) {
      if (!parse_choices(arg, argv[++i], source_name(false), source_name(true), sources)) return 2;
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else if (arg == "--isa" && has_value) {
      const std::string name = argv[++i];
      bool found = false;
      for (mxattn::cpu::SimdIsa s : mxattn::cpu::checked_isas()) {
        if (mxattn::cpu::isa_name(s) == name) isa = s, found = true;
      }
      if (!found) {
        std::cerr << "--isa " << name << ": not supported here\n";
        return 2;
      }
    } else {
      std::cerr
          << "usage: " << argv[0]
          << " [--threads N] [--reps N] [--isa "
             "portable|avx2|avx512|avx512_vbmi|avx512_bf16|avx512_amx|avx512_amx_emulated] "
             "[--case TEXT]"
             " [--decode-keys N] [--kv bf16,e4m3,...] [--kv-layout bshd,bhsd]"
             " [--row-tiles none,bf16,all] [--sources memory,cache | --hot]"
             " [--json FILE]\n"
             "  --kv: the K/V types of the decode cases: f32, f16, bf16 or MX (default bf16,e4m3)\n"
             "  --kv-layout: the decode caches stored as bshd ([B, S, Hkv, D], the default) or\n"
             "               bhsd (head-major, as PyTorch's SDPA takes them); the runs of both\n"
             "               alternated, MXFP8's speed over bf16 printed per layout\n"
             "  --row-tiles: each decode case once per MXATTN_CPU_ROW_TILES mode, the modes' runs\n"
             "               alternated, with the median ratio of each mode's paired runs to the\n"
             "               first's\n"
             "  --sources: decode from memory (a new copy of the KV cache every call, the\n"
             "             default), from the caches (one copy read every call), or both,\n"
             "             alternated, MXFP8's speed over bf16 printed per source\n"
             "  --hot: --sources cache\n";
      return 2;
    }
  }

  const StreamRead read(threads);  // for the ceiling, and beside each decode run from memory
  const Ceilings ce = measure_ceilings(threads, read);
  std::printf("mxattn cpu_fast benchmark: %d threads, kernels %s, best of %d runs\n", threads,
              std::string(mxattn::cpu::isa_name(isa)).c_str(), reps);
  std::printf(
      "FMA peak  = %d threads x %d FMA/cycle x %d lanes x 2 flop x %.2f GHz = %.1f GFLOP/s"
      "  (clock from a chain of dependent FMAs, %g cycles each; FMAs a cycle from a loop of\n"
      "            independent 512-bit FMAs, which reaches %.1f GFLOP/s)\n",
      threads, ce.fma_units, ce.lanes, ce.clock_ghz, ce.peak_gflops, kFmaLatencyCycles,
      ce.measured_gflops);
  std::printf("Bandwidth = %.1f GB/s  (streaming read of %lld MiB by %d threads)\n\n",
              ce.stream_gbs, static_cast<long long>(ce.stream_bytes >> 20), threads);

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
  for (const bool hot : sources) {
    for (const bool head_major : layouts) {
      for (DType t : decode_kv) {
        for (const std::string& mode : row_tiles) {
          Case c;
          c.name =
              "decode " + (t == DType::e4m3 ? std::string("mxfp8-e4m3") : dtype_name(t)) + " kv" +
              (layouts.size() > 1 || head_major ? " " + std::string(layout_name(head_major)) : "") +
              (mode.empty() ? "" : " tiles=" + mode) +
              (sources.size() > 1 ? " " + std::string(source_name(hot)) : "");
          c.row_tiles = mode;
          c.head_major = head_major;
          c.hot = hot;
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
                r.percent_of_ceiling,
                c.kind == "prefill" ? "of FMA peak"
                : c.hot             ? "of memory bandwidth (read from the caches)"
                                    : "of bandwidth");
  };
  // Prefill: each case's runs one after another, the first a warm-up.
  std::vector<std::unique_ptr<Runner>> decode;
  for (const Case& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    if (c.kind == "decode") {
      decode.push_back(std::make_unique<Runner>(c, isa, threads));
      continue;
    }
    const Runner run(c, isa, threads);
    std::vector<double> ms;
    for (int call = 0; call <= reps; ++call) {
      const double t = run.run_ms(call);
      if (call > 0) ms.push_back(t);
    }
    results.push_back(summarize(run, ms, {}, ce));
    print_row(results.back());
  }
  // Decode: the cases' runs alternated (bf16, E4M3, bf16, ...) so that the machine's drift falls
  // on every case alike, each run from memory followed by a streaming read.
  std::vector<std::vector<double>> ms(decode.size()), reads(decode.size());
  for (int call = 0; call <= reps; ++call) {
    for (size_t i = 0; i < decode.size(); ++i) {
      const bool hot = decode[i]->c().hot;
      const double t = decode[i]->run_ms(call);
      const double gbs = hot ? 0.0 : read.gbs();
      if (call == 0) continue;  // warm-up
      ms[i].push_back(t);
      if (!hot) reads[i].push_back(gbs);
    }
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    results.push_back(summarize(*decode[i], ms[i], reads[i], ce));
    print_row(results.back());
  }
  if (std::any_of(decode.begin(), decode.end(), [](const auto& d) { return !d->c().hot; })) {
    std::printf("\nDecode beside a streaming read made right after each run (median of %d):\n",
                reps);
    for (const Result& r : results) {
      if (r.c.kind != "decode" || r.c.hot) continue;
      std::printf("%-36s %5.1f%% of the read (read %.1f GB/s)\n", r.c.name.c_str(),
                  r.percent_of_read_beside, r.read_gbs_beside);
    }
  }
  // With several --row-tiles modes: each case's runs against the first mode's, pair by pair.
  if (row_tiles.size() > 1) {
    std::printf("\nRow-tile modes, the median of the ratios of paired runs (first mode / this):\n");
    for (const Result& r : results) {
      if (r.c.kind != "decode" || r.c.row_tiles == row_tiles[0]) continue;
      for (const Result& first : results) {
        if (first.c.kind != "decode" || first.c.kv_type != r.c.kv_type ||
            first.c.head_major != r.c.head_major || first.c.hot != r.c.hot ||
            first.c.row_tiles != row_tiles[0]) {
          continue;
        }
        std::vector<double> ratios;
        int wins = 0;
        for (size_t i = 0; i < r.run_ms.size(); ++i) {
          ratios.push_back(first.run_ms[i] / r.run_ms[i]);
          wins += r.run_ms[i] < first.run_ms[i];
        }
        std::printf("%-36s %.3fx (%d of %zu runs faster)\n", r.c.name.c_str(), median(ratios), wins,
                    ratios.size());
      }
    }
  }
  // MXFP8 over bf16 per decode source and KV layout (with several --row-tiles modes, the last
  // mode's cases).
  std::vector<std::pair<std::string, Speedups>> by_source;
  for (const bool hot : sources) {
    Speedups speedups;
    for (const bool head_major : layouts) {
      const Result* bf16 = nullptr;
      const Result* fp8 = nullptr;
      for (const Result& r : results) {
        if (r.c.kind != "decode" || r.c.head_major != head_major || r.c.hot != hot) continue;
        if (r.c.kv_type == DType::bf16) bf16 = &r;
        if (r.c.kv_type == DType::e4m3) fp8 = &r;
      }
      if (bf16 == nullptr || fp8 == nullptr) continue;
      Speedup s;
      s.best = bf16->best_ms / fp8->best_ms;
      std::vector<double> ratios;
      for (size_t i = 0; i < bf16->run_ms.size(); ++i) {
        ratios.push_back(bf16->run_ms[i] / fp8->run_ms[i]);
      }
      s.alternated = median(ratios);
      speedups.emplace_back(layout_name(head_major), s);
      std::printf(
          "\nMXFP8 decode is %.2fx faster than bf16 decode%s%s%s (best times; %.2fx, the median of"
          " the ratios of runs made one after the other)\n",
          s.best, layouts.size() > 1 ? ", " : "", layouts.size() > 1 ? layout_name(head_major) : "",
          sources.size() > 1 ? (hot ? ", from the caches" : ", from memory") : "", s.alternated);
    }
    by_source.emplace_back(source_name(hot), speedups);
  }
  if (!json_path.empty())
    write_json(json_path, ce, results, std::string(mxattn::cpu::isa_name(isa)), by_source);
  return 0;
}
