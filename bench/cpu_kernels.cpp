// Google Benchmark micro-benchmarks of the fast CPU engine's few-row decode kernels (the ones that
// read K and V rows where they lie, src/cpu/simd/rows_avx512_*.h), each on its own and as one
// decode step, and the AMX set's few-row tile kernel (src/cpu/simd/amx_rows.h: the whole step),
// with every row in the L1/L2 caches: what a key costs in arithmetic alone, apart
// from memory. One GQA group of 4 query rows against kKeys keys of one head, D = 128, for bf16 and
// E4M3 rows, in every kernel set this CPU runs that has them. The rows lie either one after the
// other (heads1: all in L1) or as one head of a BSHD cache of 8 KV heads (heads8: rows 8 apart, as
// the decode benchmark's cache, in L2 once L1's few sets for that stride are full). Counters: ns
// per key (per key and head: one call covers the group's 4 rows). A table on stdout; JSON with
//   mxattn_bench_cpu_kernels --benchmark_out=kernels.json --benchmark_out_format=json
// On a machine whose speed moves between runs (the development VM's moves by 2-3x within minutes),
// compare kernels within one process with their repetitions interleaved, and take the lowest:
//   mxattn_bench_cpu_kernels --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cpu/aligned.h"
#include "cpu/fast.h"
#include "cpu/fast_rows.h"
#include "cpu/row_tile_scratch.h"
#include "mxattn/dtype.h"
#include "mxattn/mx.h"
#include "mxattn/tensor.h"

namespace {

using mxattn::DType;
namespace cpu = mxattn::cpu;

constexpr int64_t kRows = 4, kDim = 128, kKeys = 64;
// Rows of the score and weight tile, and the bf16 query rows' stride (a multiple of 128).
constexpr int64_t kLd = kKeys, kQStride = kDim;

uint32_t next_random(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return uint32_t(s >> 33);
}

// bf16 of a value in about [-1, 1): sign, exponent 126 or below, random mantissa.
uint16_t random_bf16(uint64_t& s) {
  const uint32_t r = next_random(s);
  return uint16_t(((r & 1u) << 15) | ((120u + (r >> 1) % 7u) << 7) | ((r >> 4) & 0x7fu));
}

// `rows` rows of kDim N(0, 1) values as MX codes of `kv` and their E8M0 scales (rows * kDim / 32),
// quantized by mxattn::quantize with OCP scales.
bool quantized_normals(DType kv, int64_t rows, uint8_t* codes, uint8_t* scales) {
  static std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(size_t(rows * kDim));
  for (float& x : values) x = normal(rng);
  const mxattn::TensorView src = mxattn::make_view(values.data(), DType::f32, {rows, kDim});
  return bool(mxattn::quantize(src, mxattn::make_view(codes, kv, {rows, kDim}),
                               mxattn::make_view(scales, DType::e8m0, {rows, kDim / 32}), 1,
                               mxattn::ScaleMode::floor));
}

// Bytes of one head's kKeys rows of `kv` elements.
int64_t rows_bytes(DType kv) {
  return kKeys * kDim * (kv == DType::bf16 ? 2 : 1);
}

// One head's K and V rows (keys kDim apart, scales beside them), the group's query rows and the
// kernels' state: what direct_step in fast.cpp hands the kernels for one head and one key tile.
class DecodeTile {
 public:
  DecodeTile(DType kv, cpu::SimdIsa isa, int64_t heads)
      : kernels_(cpu::fast_kernels(isa)),
        tables_(kv),
        format_(tables_.format(kDim, 1, 32, 1)),
        keys_(cpu::zeroed<uint8_t>(rows_bytes(kv) * heads)),
        values_(cpu::zeroed<uint8_t>(rows_bytes(kv) * heads)),
        scales_(cpu::zeroed<uint8_t>(2 * kKeys * heads * kDim / 32)),
        q_(cpu::zeroed<uint16_t>(kRows * kQStride)),
        q_f32_(cpu::zeroed<float>(kRows * kQStride)),
        scores_(cpu::zeroed<float>(kRows * kLd)),
        out_(cpu::zeroed<float>(kRows * kDim)),
        q_tiles_(cpu::zeroed<uint32_t>(kRows * kDim / 2)),
        tile_scratch_(kKeys, kRows, kDim, kDim) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (uint8_t* rows : {keys_.get(), values_.get()}) {
      if (kv == DType::bf16) {
        auto* words = reinterpret_cast<uint16_t*>(rows);
        for (int64_t i = 0; i < kKeys * kDim * heads; ++i) words[i] = random_bf16(s);
      } else {
        // N(0, 1) values quantized as a cache is (OCP scales, blocks of 32 along the row): the
        // codes' magnitudes and their few zeros and subnormals are those of real data.
        const int64_t blocks = kKeys * heads * kDim / 32;
        if (!quantized_normals(kv, kKeys * heads, rows,
                               scales_.get() + (rows == keys_.get() ? 0 : blocks))) {
          std::abort();
        }
      }
    }
    for (int64_t i = 0; i < kRows * kQStride; ++i) {
      q_[i] = random_bf16(s);
      // The f32 queries of scores_from_rows (any order: the values are random), times the score
      // scale in log2 units.
      q_f32_[i] = float(int32_t(next_random(s) % 2001u) - 1000) * 1e-3f * 0.125f;
    }
    const int64_t row_bytes = rows_bytes(kv) / kKeys;
    for (int64_t k = 0; k < kKeys; ++k) {
      key_rows_.push_back(
          {keys_.get() + k * heads * row_bytes, scales_.get() + k * heads * kDim / 32});
      value_rows_.push_back(
          {values_.get() + k * heads * row_bytes, scales_.get() + (kKeys + k) * heads * kDim / 32});
    }
    for (int64_t r = 0; r < kRows; ++r) {
      row_max_[r] = -1e30f;
      row_sum_[r] = 0.0f;
      rescale_[r] = 1.0f;
    }
    // Q^T tiles of the AMX few-row kernel (RowTileStep): element pairs by query row, one part.
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t d = 0; d < kDim; d += 2) {
        q_tiles_[(d / 2) * kRows + r] =
            uint32_t(q_[r * kQStride + d]) | uint32_t(q_[r * kQStride + d + 1]) << 16;
      }
    }
  }

  bool has_tiles() const { return kernels_.attend_rows_bf16 != nullptr; }
  // Scores, softmax and values on the AMX few-row kernel (the engine's decode step in the AMX
  // set).
  void tiles() {
    cpu::RowTileStep step;
    step.key_format = &format_;
    step.value_format = &format_;
    step.keys = {key_rows_.data(), kKeys, 1, nullptr, 0};
    step.values = {value_rows_.data(), kKeys, 1, nullptr, 0};
    step.q_tiles = q_tiles_.get();
    step.rows = kRows;
    step.row_block = kRows;
    step.dim_qk_padded = step.dim_v_padded = kDim;
    step.score_factor = 0.125f;
    step.row_max = row_max_;
    step.row_sum = row_sum_;
    step.rescale = rescale_;
    step.out = out_.get();
    step.out_stride = kDim;
    tile_scratch_.attach(step);
    if (!kernels_.attend_rows_bf16(step)) std::abort();
  }
  void release() {
    if (kernels_.release_tiles) kernels_.release_tiles();
  }

  bool supported() const {
    return kernels_.scores_from_rows != nullptr && kernels_.accumulate_from_rows != nullptr;
  }

  // The set's scores of bf16 queries: bf16 dot products where it has them (the AVX-512 BF16
  // set), else f32 FMAs of the queries as f32 (what the engine runs in the AMX set).
  void scores() {
    const cpu::RowStream keys{key_rows_.data(), kKeys, 1, nullptr, 0};
    if (kernels_.scores_bf16_from_rows) {
      kernels_.scores_bf16_from_rows(format_, keys, q_.get(), kQStride, kRows, 0.125f,
                                     scores_.get(), kLd);
    } else {
      kernels_.scores_from_rows(format_, keys, q_f32_.get(), kQStride, kRows, scores_.get(), kLd);
    }
  }
  void softmax() {
    kernels_.softmax_by_rows(scores_.get(), kLd, kRows, kKeys, nullptr, nullptr, row_max_, row_sum_,
                             rescale_);
  }
  void values() {
    const cpu::RowStream values{value_rows_.data(), kKeys, 1, nullptr, 0};
    kernels_.accumulate_from_rows(format_, values, scores_.get(), kLd, rescale_, kRows, out_.get(),
                                  kDim);
  }
  const float* out() const { return out_.get(); }

 private:
  const cpu::FastKernels& kernels_;
  cpu::RowTables tables_;
  cpu::RowFormat format_;
  cpu::Aligned<uint8_t> keys_, values_, scales_;
  cpu::Aligned<uint16_t> q_;
  cpu::Aligned<float> q_f32_, scores_, out_;
  cpu::Aligned<uint32_t> q_tiles_;
  cpu::RowTileScratch tile_scratch_;
  std::vector<cpu::RowSource> key_rows_, value_rows_;
  float row_max_[kRows], row_sum_[kRows], rescale_[kRows];
};

enum class Part { scores, softmax, values, step, tiles };

void BM_DecodeKernel(benchmark::State& state, cpu::SimdIsa isa, DType kv, Part part,
                     int64_t heads) {
  DecodeTile tile(kv, isa, heads);
  if (!tile.supported() || (part == Part::tiles && !tile.has_tiles())) {
    state.SkipWithError("this kernel set has no such kernels");
    return;
  }
  tile.scores();
  tile.softmax();
  for (auto _ : state) {
    switch (part) {
      case Part::scores:
        tile.scores();
        break;
      case Part::softmax:
        tile.softmax();
        break;
      case Part::values:
        tile.values();
        break;
      case Part::step:
        tile.scores();
        tile.softmax();
        tile.values();
        break;
      case Part::tiles:
        tile.tiles();
        break;
    }
    benchmark::DoNotOptimize(tile.out());
    benchmark::ClobberMemory();
  }
  tile.release();
  state.SetItemsProcessed(int64_t(state.iterations()) * kKeys);
  state.counters["ns_per_key"] =
      benchmark::Counter(double(state.iterations()) * kKeys,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void register_all() {
  const char* part_names[] = {"scores", "softmax", "values", "step", "tiles"};
  for (const cpu::SimdIsa isa : cpu::supported_isas()) {
    if (isa != cpu::SimdIsa::avx512_bf16 && isa != cpu::SimdIsa::avx512_amx) continue;
    for (const DType kv : {DType::bf16, DType::e4m3}) {
      for (const int64_t heads : {1, 8}) {
        for (int part = 0; part < 5; ++part) {
          if (Part(part) == Part::tiles && isa != cpu::SimdIsa::avx512_amx) continue;
          const std::string name =
              "decode_" + std::string(part_names[part]) + "/" + std::string(cpu::isa_name(isa)) +
              "/" + std::string(mxattn::name_of(kv)) + "/heads" + std::to_string(heads);
          benchmark::RegisterBenchmark(name.c_str(), BM_DecodeKernel, isa, kv, Part(part), heads);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
