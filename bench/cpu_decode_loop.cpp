// The CPU engine's few-row decode kernels in the engine's own loop, over a cache in memory and over
// a cache-resident copy: how much of their arithmetic hides under their reads (docs/perf.md,
// session 29).
//
//   mxattn_bench_cpu_decode_loop [--kv bf16|e4m3] [--kernels fma|tiles] [--fetch on|off]
//                                [--layout bshd|bhsd] [--mib N] [--rounds N] [--json FILE]
//
// A BSHD cache (--layout bhsd: head-major, each head's rows one after the other) of 8 KV heads,
// D 128 (--mib of K and as much of V, in bf16; half that in E4M3), one GQA group of 4 query rows
// a head. Per tile of 64 keys and per head, as direct_step in src/cpu/fast.cpp does: the FMA
// kernels (scores_from_rows, softmax_by_rows, accumulate_from_rows) or the AMX tile kernel
// (attend_rows_bf16), the next tile's rows located and, with --fetch on, fetched in memory order
// (head h the h-th slice). For the AMX set, one thread. The table gives the loop's time over a
// cache-resident copy ("cache", scaled to the whole), the loop's fetches and one load a line
// alone from memory ("read"), the loop from memory ("memory"), and where that lies between the
// larger of the first two (0%: the arithmetic hides entirely) and their sum (100%: none of it
// does).
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cpu/aligned.h"
#include "cpu/fast.h"
#include "cpu/fast_rows.h"
#include "cpu/row_tile_scratch.h"
#include "mx/formats.h"
#include "mxattn/dtype.h"

namespace {

using mxattn::DType;
namespace cpu = mxattn::cpu;

constexpr int64_t kHeads = 8, kTile = 64, kDim = 128, kRows = 4;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// K and V rows of `keys` keys x kHeads heads, `row_bytes` a row.
// Page-aligned, as a cache's allocation would be.
struct Cache {
  cpu::Aligned<uint8_t, 4096> k, v;
  int64_t keys = 0, row_bytes = 0;
};

Cache make_cache(int64_t keys, int64_t row_bytes) {
  Cache c{cpu::zeroed<uint8_t, 4096>(keys * kHeads * row_bytes),
          cpu::zeroed<uint8_t, 4096>(keys * kHeads * row_bytes), keys, row_bytes};
  // E4M3 codes of N(0, 1) values at the scale 2^-7 that OCP scaling gives blocks of them (the
  // cache's one scale byte, 120): real data's magnitudes, with its few zeros and subnormals.
  std::vector<uint8_t> pool(size_t(1) << 16);
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint8_t& code : pool) code = mxattn::mx::encode(DType::e4m3, normal(rng) * 128.0f);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (uint8_t* p : {c.k.get(), c.v.get()}) {
    for (int64_t i = 0; i < keys * kHeads * row_bytes; ++i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const auto r = uint32_t(s >> 33);
      if (row_bytes == 2 * kDim) {
        // bf16 of magnitude 0.5 to 2: the high byte 0x3e or 0x3f (or with the sign), any low byte.
        p[i] = i % 2 ? uint8_t(0x3e + (r & 1) + (r & 0x100 ? 0x80 : 0)) : uint8_t(r);
      } else {
        p[i] = pool[r >> 16];
      }
    }
  }
  return c;
}

struct Options {
  DType kv = DType::bf16;
  bool tiles = false;
  bool fetch = true;
  bool head_major = false;
  int64_t mib = 256;
  int rounds = 3;
  std::string json;
};

class Loop {
 public:
  explicit Loop(const Options& o)
      : o_(o),
        kernels_(cpu::fast_kernels(cpu::SimdIsa::avx512_amx)),
        tables_(o.kv),
        format_(tables_.format(kDim, 1, 32, 1)),
        q_(cpu::zeroed<float>(kRows * kDim)),
        q_tiles_(cpu::zeroed<uint32_t>(kRows * kDim / 2)),
        scores_(cpu::zeroed<float>(kRows * kTile)),
        out_(cpu::zeroed<float>(kHeads * kRows * kDim)),
        tile_scratch_(kTile, kRows, kDim, kDim),
        keys_(size_t(kTile * kHeads)),
        values_(keys_.size()),
        next_keys_(keys_.size()),
        next_values_(keys_.size()) {
    std::memset(scales_, 120, sizeof scales_);
    for (int64_t i = 0; i < kRows * kDim; ++i) q_[i] = float(i % 7 - 3) * 0.01f;
    // Q^T of the tile kernel: bf16 pairs of 0.0078 (0x3c00), one part.
    for (int64_t i = 0; i < kRows * kDim / 2; ++i) q_tiles_[i] = 0x3c003c00u;
  }

  // One pass over every key of every head; seconds. Without `work`, only the fetches and one load
  // a line of the rows.
  double pass(const Cache& c, bool work) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t r = 0; r < kRows; ++r) {
        row_max_[h][r] = -1e30f;
        row_sum_[h][r] = 0.0f;
        rescale_[h][r] = 1.0f;
      }
    }
    const double start = now_s();
    locate(c, 0, keys_, values_);
    for (int64_t k0 = 0; k0 < c.keys; k0 += kTile) {
      const int64_t next = k0 + kTile < c.keys ? kTile : 0;
      if (next > 0) locate(c, k0 + kTile, next_keys_, next_values_);
      const int64_t slice = o_.fetch ? next / kHeads * kHeads : 0;  // rows each head fetches
      for (int64_t h = 0; h < kHeads; ++h) {
        const cpu::RowStream ks{keys_.data() + h, kTile, kHeads, next_keys_.data() + h * slice,
                                slice};
        const cpu::RowStream vs{values_.data() + h, kTile, kHeads, next_values_.data() + h * slice,
                                slice};
        if (!work) {
          touch(ks, c.row_bytes);
          touch(vs, c.row_bytes);
        } else if (o_.tiles) {
          tile_step(ks, vs, h);
        } else {
          kernels_.scores_from_rows(format_, ks, q_.get(), kDim, kRows, scores_.get(), kTile);
          kernels_.softmax_by_rows(scores_.get(), kTile, kRows, kTile, nullptr, nullptr,
                                   row_max_[h], row_sum_[h], rescale_[h]);
          kernels_.accumulate_from_rows(format_, vs, scores_.get(), kTile, rescale_[h], kRows,
                                        out_.get() + h * kRows * kDim, kDim);
        }
      }
      std::swap(keys_, next_keys_);
      std::swap(values_, next_values_);
    }
    return now_s() - start;
  }

  void release() {
    if (kernels_.release_tiles) kernels_.release_tiles();
  }
  float checksum() const { return out_[5] + out_[kRows * kDim + 7]; }

 private:
  // Rows of keys [k0, k0 + kTile) by key, then head, as Scratch::key_sources holds them.
  void locate(const Cache& c, int64_t k0, std::vector<cpu::RowSource>& keys,
              std::vector<cpu::RowSource>& values) const {
    for (int64_t j = 0; j < kTile; ++j) {
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t at =
            (o_.head_major ? h * c.keys + k0 + j : (k0 + j) * kHeads + h) * c.row_bytes;
        keys[size_t(j * kHeads + h)] = {c.k.get() + at, scales_};
        values[size_t(j * kHeads + h)] = {c.v.get() + at, scales_};
      }
    }
  }

  // The stream's fetches and one load a line of its rows, no arithmetic.
  static void touch(const cpu::RowStream& s, int64_t row_bytes) {
    for (int64_t j = 0; j < s.count; ++j) {
      if (j < s.next_count) cpu::prefetch_lines<2>(s.next[j].data, row_bytes);
      const uint8_t* row = s.rows[j * s.step].data;
      for (int64_t l = 0; l < row_bytes; l += 64) {
        uint64_t word;
        std::memcpy(&word, row + l, sizeof word);
        asm volatile("" : : "r"(word));
      }
    }
  }

  void tile_step(const cpu::RowStream& ks, const cpu::RowStream& vs, int64_t h) {
    cpu::RowTileStep st;
    st.key_format = &format_;
    st.value_format = &format_;
    st.keys = ks;
    st.values = vs;
    st.q_tiles = q_tiles_.get();
    st.rows = kRows;
    st.row_block = kRows;
    st.dim_qk_padded = st.dim_v_padded = kDim;
    st.score_factor = 0.125f;
    st.row_max = row_max_[h];
    st.row_sum = row_sum_[h];
    st.rescale = rescale_[h];
    st.out = out_.get() + h * kRows * kDim;
    st.out_stride = kDim;
    tile_scratch_.attach(st);
    if (!kernels_.attend_rows_bf16(st)) {
      std::fprintf(stderr, "the tile kernel declined a tile\n");
      std::exit(1);
    }
  }

  Options o_;
  const cpu::FastKernels& kernels_;
  cpu::RowTables tables_;
  cpu::RowFormat format_;
  uint8_t scales_[64];
  cpu::Aligned<float> q_;
  cpu::Aligned<uint32_t> q_tiles_;
  cpu::Aligned<float> scores_, out_;
  cpu::RowTileScratch tile_scratch_;
  std::vector<cpu::RowSource> keys_, values_, next_keys_, next_values_;
  float row_max_[kHeads][kRows], row_sum_[kHeads][kRows], rescale_[kHeads][kRows];
};

int usage(const char* name, int code) {
  std::fprintf(stderr,
               "usage: %s [--kv bf16|e4m3] [--kernels fma|tiles] [--fetch on|off] "
               "[--layout bshd|bhsd] [--mib N] [--rounds N] [--json FILE]\n",
               name);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") return usage(argv[0], 0);
    if (i + 1 >= argc) return usage(argv[0], 2);
    const std::string value = argv[++i];
    if (arg == "--kv" && (value == "bf16" || value == "e4m3")) {
      o.kv = value == "bf16" ? DType::bf16 : DType::e4m3;
    } else if (arg == "--kernels" && (value == "fma" || value == "tiles")) {
      o.tiles = value == "tiles";
    } else if (arg == "--fetch" && (value == "on" || value == "off")) {
      o.fetch = value == "on";
    } else if (arg == "--layout" && (value == "bshd" || value == "bhsd")) {
      o.head_major = value == "bhsd";
    } else if (arg == "--mib" && std::atoll(value.c_str()) >= 1) {
      o.mib = std::atoll(value.c_str());
    } else if (arg == "--rounds" && std::atoi(value.c_str()) >= 1) {
      o.rounds = std::atoi(value.c_str());
    } else if (arg == "--json") {
      o.json = value;
    } else {
      std::fprintf(stderr, "bad option %s %s\n", arg.c_str(), value.c_str());
      return usage(argv[0], 2);
    }
  }
  // supported_isas() also asks the kernel for the tile unit's state (arch_prctl).
  const std::vector<cpu::SimdIsa> isas = cpu::supported_isas();
  if (std::find(isas.begin(), isas.end(), cpu::SimdIsa::avx512_amx) == isas.end()) {
    std::fprintf(stderr, "this benchmark needs the AMX kernel set (Sapphire Rapids or later)\n");
    return 1;
  }
  // Subnormals flushed and read as zero, as on the engine's threads.
  _mm_setcsr(_mm_getcsr() | 0x8040);
  const int64_t row_bytes = o.kv == DType::bf16 ? 2 * kDim : kDim;
  const int64_t keys = (o.mib << 20) / (kHeads * 2 * kDim) / kTile * kTile;
  const int64_t cached_keys = 2 * kTile;
  const Cache memory = make_cache(keys, row_bytes), cached = make_cache(cached_keys, row_bytes);
  Loop loop(o);
  std::printf(
      "decode loop: %s, %s kernels, fetch %s, %s, %lld keys x %lld heads (%.0f MiB of K and V), "
      "one thread\n",
      o.kv == DType::bf16 ? "bf16" : "e4m3", o.tiles ? "tile" : "FMA", o.fetch ? "on" : "off",
      o.head_major ? "bhsd" : "bshd", static_cast<long long>(keys), static_cast<long long>(kHeads),
      2.0 * double(keys * kHeads * row_bytes) / (1 << 20));
  std::printf("%6s %10s %10s %12s %11s\n", "round", "cache ms", "read ms", "memory ms",
              "toward sum");
  struct Round {
    double cache, read, memory, toward_sum;
  };
  std::vector<Round> rounds;
  for (int round = 0; round < o.rounds; ++round) {
    Round r{1e30, 1e30, 1e30, 0};
    for (int i = 0; i < 3; ++i) {
      r.memory = std::min(r.memory, 1e3 * loop.pass(memory, true));
      double cache = 0;
      for (int64_t j = 0; j < keys / cached_keys; ++j) cache += loop.pass(cached, true);
      r.cache = std::min(r.cache, 1e3 * cache);
      r.read = std::min(r.read, 1e3 * loop.pass(memory, false));
    }
    const double lo = std::max(r.cache, r.read), hi = r.cache + r.read;
    r.toward_sum = hi > lo ? (r.memory - lo) / (hi - lo) : 0.0;
    std::printf("%6d %10.1f %10.1f %12.1f %10.0f%%\n", round + 1, r.cache, r.read, r.memory,
                100 * r.toward_sum);
    rounds.push_back(r);
  }
  loop.release();
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << "{\n  \"benchmark\": \"cpu_decode_loop\",\n  \"kv\": \""
        << (o.kv == DType::bf16 ? "bf16" : "e4m3") << "\",\n  \"kernels\": \""
        << (o.tiles ? "tiles" : "fma") << "\",\n  \"fetch\": " << (o.fetch ? "true" : "false")
        << ",\n  \"layout\": \"" << (o.head_major ? "bhsd" : "bshd") << "\""
        << ",\n  \"keys\": " << keys << ",\n  \"heads\": " << kHeads << ",\n  \"rounds\": [\n";
    for (size_t i = 0; i < rounds.size(); ++i) {
      const Round& r = rounds[i];
      out << "    {\"cache_ms\": " << r.cache << ", \"read_ms\": " << r.read
          << ", \"memory_ms\": " << r.memory << ", \"toward_sum\": " << r.toward_sum << "}"
          << (i + 1 < rounds.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
  }
  volatile float keep = loop.checksum();  // the kernels' results, so that none of them is dropped
  (void)keep;
  return 0;
}
