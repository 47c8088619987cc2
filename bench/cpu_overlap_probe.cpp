// Does a core overlap arithmetic with its reads from memory? A probe of the CPU decode's access
// pattern, independent of the engine (docs/perf.md, session 29).
//
//   mxattn_probe_overlap [--rows 1|2|packed] [--fetch memory|own] [--heads N]
//                        [--work 0,4,8,12,16] [--mib N] [--rounds N] [--json FILE]
//
// Rows of 256 bytes lie N x 256 bytes apart (--heads N heads of a BSHD cache, default 8), read
// head by head in tiles of 64 keys. As each row is read, 256 bytes of the next tile are fetched
// into L2 (prefetcht1): with --fetch memory (default) the next tile's bytes in memory order, each
// head its share (head h the h-th slice), as the engine's kernels fetch; with --fetch own the same
// row of the next tile. Each row's 4 vectors seed 4 independent chains of `work` FMAs each, so the
// arithmetic needs the row's data, as a kernel's does. --rows 1 reads one row a key; 2 a K row and
// a V row from two buffers; packed the two side by side in one buffer. For each amount of work the
// table gives the loop's time over a cache-resident buffer (scaled to the whole), the time of
// reading alone (work 0) from memory, the time with the work from memory, and where that lies
// between the larger of the first two (full overlap, 0%) and their sum (none, 100%). One thread;
// pin it (taskset) on a busy host. Needs AVX-512F.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int64_t kTile = 64, kRowBytes = 256;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

enum class Rows { one, two, packed };

struct Buffers {
  char* k = nullptr;
  char* v = nullptr;  // Rows::two only
  int64_t keys = 0;   // keys a head
  int64_t heads = 8;
};

// One pass over every key of every head; returns seconds. The arithmetic's result goes to `sink`
// so that the compiler keeps it.
__attribute__((target("avx512f,fma"), noinline)) double pass(const Buffers& b, Rows rows, bool own,
                                                             int work, float& sink) {
  const int row_count = rows == Rows::one ? 1 : 2;
  const int64_t heads = b.heads;
  const int64_t stride = (rows == Rows::packed ? 2 : 1) * heads * kRowBytes;
  // --fetch memory: the next tile's bytes of a buffer, kTile * stride, head h fetching slice h.
  const int64_t slice = kTile * stride / heads;
  const int64_t head_bytes = rows == Rows::packed ? 2 * kRowBytes : kRowBytes;
  const __m512 m = _mm512_set1_ps(0.999f);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  const double start = now_s();
  for (int64_t k0 = 0; k0 < b.keys; k0 += kTile) {
    for (int64_t h = 0; h < heads; ++h) {
      __m512 o[4] = {acc[0], acc[1], acc[2], acc[3]};
      for (int64_t k = k0; k < std::min(k0 + kTile, b.keys); ++k) {
        for (int r = 0; r < row_count; ++r) {
          const char* row = rows == Rows::two && r == 1
                                ? b.v + k * stride + h * head_bytes
                                : b.k + k * stride + h * head_bytes + r * kRowBytes;
          if (k0 + kTile < b.keys) {
            const char* base = rows == Rows::two && r == 1 ? b.v : b.k;
            const char* next =
                own ? row + kTile * stride
                    : base + (k0 + kTile) * stride + h * slice +
                          ((k - k0) * (rows == Rows::packed ? 2 : 1) + r) * kRowBytes;
            if (own && k + kTile >= b.keys) next = row;
            for (int l = 0; l < 4; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T1);
          }
          __m512 v[4];
          for (int i = 0; i < 4; ++i)
            v[i] = _mm512_load_ps(reinterpret_cast<const float*>(row) + 16 * i);
          for (int w = 0; w < work; ++w) {
            for (int i = 0; i < 4; ++i) v[i] = _mm512_fmadd_ps(v[i], m, acc[i]);
          }
          for (int i = 0; i < 4; ++i) o[i] = _mm512_add_ps(o[i], v[i]);
        }
      }
      for (int i = 0; i < 4; ++i) acc[i] = _mm512_mul_ps(o[i], m);
    }
  }
  const double seconds = now_s() - start;
  sink += _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  return seconds;
}

char* page_aligned(int64_t bytes) {
  const int64_t rounded = (bytes + 4095) / 4096 * 4096;
  char* p = static_cast<char*>(std::aligned_alloc(4096, size_t(rounded)));
  if (!p) {
    std::fprintf(stderr, "out of memory (%lld bytes)\n", static_cast<long long>(rounded));
    std::exit(1);
  }
  std::memset(p, 0, size_t(rounded));
  return p;
}

Buffers make_buffers(Rows rows, int64_t heads, int64_t bytes_a_buffer) {
  Buffers b;
  b.heads = heads;
  const int64_t stride = heads * kRowBytes;
  b.keys = bytes_a_buffer / stride / kTile * kTile;
  const int64_t k_bytes = b.keys * stride * (rows == Rows::packed ? 2 : 1);
  b.k = page_aligned(k_bytes);
  if (rows == Rows::two) b.v = page_aligned(b.keys * stride);
  return b;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::atoi(item.c_str()));
  return out;
}

struct Row {
  int work;
  double cache_ms, read_ms, memory_ms;
  double toward_sum() const {
    const double lo = std::max(cache_ms, read_ms), hi = cache_ms + read_ms;
    return hi > lo ? (memory_ms - lo) / (hi - lo) : 0.0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Rows rows = Rows::two;
  bool own = false;
  int64_t heads = 8;
  std::vector<int> works = {0, 4, 8, 12, 16};
  int64_t mib = 256;
  int rounds = 3;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--rows" && has_value) {
      const std::string r = argv[++i];
      if (r == "1") {
        rows = Rows::one;
      } else if (r == "2") {
        rows = Rows::two;
      } else if (r == "packed") {
        rows = Rows::packed;
      } else {
        std::fprintf(stderr, "--rows takes 1, 2 or packed, not %s\n", r.c_str());
        return 2;
      }
    } else if (arg == "--fetch" && has_value) {
      const std::string f = argv[++i];
      if (f != "memory" && f != "own") {
        std::fprintf(stderr, "--fetch takes memory or own, not %s\n", f.c_str());
        return 2;
      }
      own = f == "own";
    } else if (arg == "--heads" && has_value) {
      heads = std::atoll(argv[++i]);
      if (heads < 1 || heads > 64) {
        std::fprintf(stderr, "--heads takes 1 to 64\n");
        return 2;
      }
    } else if (arg == "--work" && has_value) {
      works = parse_list(argv[++i]);
    } else if (arg == "--mib" && has_value) {
      mib = std::atoll(argv[++i]);
    } else if (arg == "--rounds" && has_value) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && has_value) {
      json = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rows 1|2|packed] [--fetch memory|own] [--heads N] "
                   "[--work 0,4,8,12,16] [--mib N] [--rounds N] [--json FILE]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "this probe needs AVX-512F\n");
    return 1;
  }
  if (mib < 4) {
    std::fprintf(stderr, "--mib must be at least 4\n");
    return 2;
  }
  const char* rows_name = rows == Rows::one ? "1" : rows == Rows::two ? "2" : "packed";
  // The memory buffers, and a cache-resident copy of the same layout (256 KiB a buffer).
  const Buffers memory = make_buffers(rows, heads, mib << 20);
  const Buffers cached = make_buffers(rows, heads, 256 << 10);
  const int64_t repeats = memory.keys / cached.keys;
  const double bytes = double(memory.keys) * heads * kRowBytes * (rows == Rows::one ? 1 : 2);
  std::printf(
      "overlap probe: rows a key %s, %lld heads, fetch %s, %.0f MiB read a pass, %d rounds (best "
      "of each)\n",
      rows_name, static_cast<long long>(heads), own ? "own" : "memory", bytes / (1 << 20), rounds);
  std::printf("%6s %10s %10s %12s %14s %10s\n", "work", "cache ms", "read ms", "memory ms",
              "sum / max ms", "toward sum");
  float sink = 0;
  std::vector<Row> results;
  for (const int work : works) {
    Row r{work, 1e30, 1e30, 1e30};
    for (int round = 0; round < rounds; ++round) {
      r.memory_ms = std::min(r.memory_ms, 1e3 * pass(memory, rows, own, work, sink));
      double cache = 0;
      for (int64_t j = 0; j < repeats; ++j) cache += pass(cached, rows, own, work, sink);
      r.cache_ms = std::min(r.cache_ms, 1e3 * cache);
      r.read_ms = std::min(r.read_ms, 1e3 * pass(memory, rows, own, 0, sink));
    }
    std::printf("%6d %10.1f %10.1f %12.1f %6.1f / %5.1f %9.0f%%\n", work, r.cache_ms, r.read_ms,
                r.memory_ms, r.cache_ms + r.read_ms, std::max(r.cache_ms, r.read_ms),
                100 * r.toward_sum());
    results.push_back(r);
  }
  std::printf("(0%%: the work hides entirely under the reads; 100%%: the time is their sum)\n");
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\n  \"probe\": \"cpu_overlap\",\n  \"rows\": \"" << rows_name
        << "\",\n  \"heads\": " << heads << ",\n  \"fetch\": \"" << (own ? "own" : "memory")
        << "\",\n  \"bytes_a_pass\": " << bytes << ",\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Row& r = results[i];
      out << "    {\"work\": " << r.work << ", \"cache_ms\": " << r.cache_ms
          << ", \"read_ms\": " << r.read_ms << ", \"memory_ms\": " << r.memory_ms
          << ", \"toward_sum\": " << r.toward_sum() << "}" << (i + 1 < results.size() ? "," : "")
          << "\n";
    }
    out << "  ]\n}\n";
  }
  volatile float keep = sink;  // the arithmetic's result, so that none of it is dropped
  (void)keep;
  return 0;
}
