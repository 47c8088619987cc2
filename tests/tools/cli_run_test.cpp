// The built `mxattn` binary end to end: every verb's --help, one-line usage errors with exit code
// 2, and quant -> dequant equal to dequantize(quantize(x)) in process, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/float16.h"
#include "mx_files.h"
#include "mxattn/build_info.h"
#include "npy.h"
#include "test_files.h"

namespace mxattn::tools {
namespace {

// The verbs `mxattn --help` lists (the indented lines under "verbs:").
std::vector<std::string> listed_verbs(const TempDir& dir) {
  const CommandResult help = run_cli(dir, "--help");
  EXPECT_EQ(help.exit_code, 0);
  std::vector<std::string> verbs;
  std::istringstream lines(help.out);
  std::string line;
  bool in_verbs = false;
  while (std::getline(lines, line)) {
    if (line == "verbs:") {
      in_verbs = true;
    } else if (in_verbs && line.starts_with("  ") && !line.starts_with("  --")) {
      verbs.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_verbs && line.empty()) {
      break;
    }
  }
  return verbs;
}

bool is_one_line(const std::string& text) {
  return !text.empty() && text.back() == '\n' && text.find('\n') == text.size() - 1;
}

TEST(CliRun, HelpAndVersion) {
  const TempDir dir("cli_help");
  const std::vector<std::string> verbs = listed_verbs(dir);
  for (const char* expected : {"quant", "dequant", "formats"}) {
    EXPECT_NE(std::find(verbs.begin(), verbs.end(), expected), verbs.end()) << expected;
  }
  for (const std::string& verb : verbs) {
    SCOPED_TRACE(verb);
    const CommandResult help = run_cli(dir, verb + " --help");
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_TRUE(help.out.starts_with("usage: mxattn " + verb)) << help.out;
    EXPECT_NE(help.out.find("--help"), std::string::npos);
    EXPECT_TRUE(help.err.empty()) << help.err;
  }
  const CommandResult version = run_cli(dir, "--version");
  EXPECT_EQ(version.exit_code, 0);
  // The version, then what this build holds (mxattn::build_info).
  EXPECT_TRUE(version.out.starts_with("mxattn " + mxattn::build_info().version + "\n"))
      << version.out;
  EXPECT_NE(version.out.find("CPU kernel sets: portable"), std::string::npos) << version.out;
#if MXATTN_WITH_CUDA
  EXPECT_NE(version.out.find("CUDA engines: decode"), std::string::npos) << version.out;
#else
  EXPECT_NE(version.out.find("CUDA engines: not built"), std::string::npos) << version.out;
#endif
}

TEST(CliRun, BadArgumentsExitTwoWithOneLine) {
  const TempDir dir("cli_bad");
  for (const std::string& verb : listed_verbs(dir)) {
    SCOPED_TRACE(verb);
    const CommandResult bad = run_cli(dir, verb + " --no-such-flag 1");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_TRUE(is_one_line(bad.err)) << bad.err;
    EXPECT_TRUE(bad.err.starts_with("mxattn " + verb + ": ")) << bad.err;
    EXPECT_TRUE(bad.out.empty()) << bad.out;
  }
  const CommandResult unknown = run_cli(dir, "frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err, "mxattn: unknown verb 'frobnicate' (see mxattn --help)\n");

  base::HostTensor x(DType::f32, {2, 8});
  ASSERT_TRUE(write_npy(dir.file("x.npy"), x.view()));
  const CommandResult bad_axis = run_cli(
      dir, "quant " + dir.file("x.npy") + " --format mxfp4 --axis 2 --out " + dir.file("p"));
  EXPECT_EQ(bad_axis.exit_code, 2);
  EXPECT_EQ(bad_axis.err, "mxattn quant: --axis 2 is outside [-2, 2) for shape [2, 8]\n");

  const CommandResult missing =
      run_cli(dir, "quant " + dir.file("none.npy") + " --format e5m2 --out " + dir.file("p"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "mxattn quant: " + dir.file("none.npy") + ": cannot open for reading\n");
}

// `mxattn plan` shows spec §3's pinned conservative counts (rocMLIR's prefix-causal case) and the
// auto split's target, the engine's or the one given with --split-target.
TEST(CliRun, PlanShowsThePinnedCountsAndTheAutoTarget) {
  const TempDir dir("cli_plan");
  const CommandResult pinned =
      run_cli(dir,
              "plan --seq-len-q 4 --seq-len-k 128 --num-heads-q 1 --num-heads-kv 1 --causal=prefix "
              "--prefix-offset 62 --split-kv 4 --tile-n 32 --engine cpu");
  EXPECT_EQ(pinned.exit_code, 0) << pinned.err;
  EXPECT_NE(pinned.out.find("exact count 3"), std::string::npos) << pinned.out;
  EXPECT_NE(pinned.out.find("conservative per-row counts: 2 2 3 3"), std::string::npos)
      << pinned.out;

  const std::string auto_split =
      "plan --seq-len-q 1 --seq-len-k 8192 --num-heads-q 1 --num-heads-kv 1 --split-kv auto "
      "--engine cpu";
  const CommandResult engine = run_cli(dir, auto_split);
  EXPECT_EQ(engine.exit_code, 0) << engine.err;
  EXPECT_NE(engine.out.find("(32 key tiles per split"), std::string::npos) << engine.out;
  EXPECT_NE(engine.out.find("128 key tiles, split_kv 4"), std::string::npos) << engine.out;
  const CommandResult given = run_cli(dir, auto_split + " --split-target 8");
  EXPECT_EQ(given.exit_code, 0) << given.err;
  EXPECT_NE(given.out.find("(8 key tiles per split"), std::string::npos) << given.out;
  EXPECT_NE(given.out.find("128 key tiles, split_kv 16"), std::string::npos) << given.out;

  const CommandResult negative = run_cli(dir, auto_split + " --split-target -1");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_TRUE(is_one_line(negative.err)) << negative.err;
}

// `mxattn plan --engine cuda` prints the partition of the CUDA engine that runs the problem (the
// decode engine's 128-key tiles and 8-tile auto splits at 8192 keys; the prefill engine's 128-row
// tiles for a long query), with no GPU needed; a build without CUDA says so.
TEST(CliRun, PlanPrintsTheChosenEnginesPartition) {
  const TempDir dir("cli_plan_engine");
  const std::string decode =
      "plan --seq-len-q 1 --seq-len-k 8192 --num-heads-q 8 --num-heads-kv 8 --split-kv auto "
      "--engine cuda";
  const CommandResult got = run_cli(dir, decode);
#if MXATTN_WITH_CUDA
  EXPECT_EQ(got.exit_code, 0) << got.err;
  EXPECT_NE(got.out.find("engine:  cuda-decode"), std::string::npos) << got.out;
  EXPECT_NE(got.out.find("tile_m=16 rows, tile_n=128 keys"), std::string::npos) << got.out;
  EXPECT_NE(got.out.find("(8 key tiles per split"), std::string::npos) << got.out;
  EXPECT_NE(got.out.find("64 key tiles, split_kv 8"), std::string::npos) << got.out;
#if MXATTN_WITH_PREFILL
  const CommandResult prefill =
      run_cli(dir,
              "plan --seq-len-q 512 --seq-len-k 512 --num-heads-q 2 --num-heads-kv 2 --q-format "
              "bf16 --k-format bf16 --v-format bf16 --engine cuda");
  EXPECT_EQ(prefill.exit_code, 0) << prefill.err;
  EXPECT_NE(prefill.out.find("engine:  cuda-prefill"), std::string::npos) << prefill.out;
  EXPECT_NE(prefill.out.find("tile_m=128 rows, tile_n=128 keys"), std::string::npos) << prefill.out;
#endif
#else
  EXPECT_EQ(got.exit_code, 2);
  EXPECT_EQ(got.err, "mxattn plan: engine: this build of mxattn has no CUDA engine\n");
#endif
  const CommandResult cpu = run_cli(dir, "plan --seq-len-q 1 --seq-len-k 8192 --engine cpu");
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_NE(cpu.out.find("engine:  cpu-fast"), std::string::npos) << cpu.out;
}

// A --kv-len outside [0, Sk] is refused by name, exit 2, before the generator writes anything
// (it once poisoned memory past the end of the cache).
TEST(CliRun, KvLenOutsideTheKeysIsAUsageError) {
  const TempDir dir("cli_kv_len");
  for (const char* lengths : {"100", "-1", "64,65"}) {
    for (const char* verb : {"run --repeat 1", "plan"}) {
      SCOPED_TRACE(std::string(verb) + " --kv-len " + lengths);
      const CommandResult bad =
          run_cli(dir, std::string(verb) + " --batch 2 --seq-len-k 64 --kv-len " + lengths +
                           " --num-heads-q 2 --num-heads-kv 1 --engine cpu");
      EXPECT_EQ(bad.exit_code, 2);
      EXPECT_TRUE(is_one_line(bad.err)) << bad.err;
      EXPECT_NE(bad.err.find("kv_len["), std::string::npos) << bad.err;
      EXPECT_NE(bad.err.find("is outside [0, 64]"), std::string::npos) << bad.err;
    }
  }
}

// A paged cache whose last page is partly padding: the padding (poisoned) is never a key, so the
// outputs are finite and --verify passes on them, for every engine the CPU build has.
TEST(CliRun, PagePaddingIsNeverAKey) {
  const TempDir dir("cli_paged");
  for (const char* engine : {"cpu", "reference"}) {
    for (const char* keys : {"7", "40"}) {
      SCOPED_TRACE(std::string(engine) + " --seq-len-k " + keys);
      const CommandResult got =
          run_cli(dir, std::string("run --paged 32 --seq-len-k ") + keys +
                           " --num-heads-q 4 --num-heads-kv 2 --repeat 1 --engine " + engine);
      EXPECT_EQ(got.exit_code, 0) << got.out << got.err;
      EXPECT_NE(got.out.find(std::string("Sk=") + keys + " "), std::string::npos) << got.out;
      // NaN outputs leave nothing finite to compare: the errors would read exactly 0.
      EXPECT_EQ(got.out.find("O    max_abs 0.000e+00  rel_l2 0.000e+00"), std::string::npos)
          << got.out;
      EXPECT_EQ(got.out.find("inputs): rel_l2 0.000e+00"), std::string::npos) << got.out;
      EXPECT_NE(got.out.find("result:  PASS"), std::string::npos) << got.out;
    }
  }
}

void fill(base::HostTensor& x, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> binade(-8, 8);
  for (int64_t i = 0; i < x.numel(); ++i) {
    base::store_float(x.view(), i, std::ldexp(normal(rng), binade(rng)));
  }
}

// quant + dequant through the binary against the same calls made here.
TEST(CliRun, QuantDequantRoundTripMatchesTheLibrary) {
  const TempDir dir("cli_round_trip");
  const uint64_t seed = 3001;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<int64_t> shape = {3, 37,
                                      38};  // partial blocks on both axes, FP6/FP4 row padding
  base::HostTensor x(DType::f32, shape);
  fill(x, seed);
  x.data<float>()[100] = NAN;
  const std::string input = dir.file("x.npy");
  ASSERT_TRUE(write_npy(input, x.view()));
  const std::string prefix = dir.file("q");
  const std::string output = dir.file("y.npy");
  const std::pair<const char*, DType> formats[] = {{"e4m3", DType::e4m3},
                                                   {"e5m2", DType::e5m2},
                                                   {"mxfp6", DType::e2m3},
                                                   {"e3m2", DType::e3m2},
                                                   {"mxfp4", DType::e2m1}};
  for (const auto& [word, format] : formats) {
    for (int axis : {-1, 1}) {
      for (const char* mode : {"floor", "rceil"}) {
        SCOPED_TRACE(std::string(word) + " axis " + std::to_string(axis) + " " + mode);
        const CommandResult q = run_cli(dir, "quant " + input + " --format " + word +
                                                 " --axis=" + std::to_string(axis) +
                                                 " --scale-mode " + mode + " --out " + prefix);
        ASSERT_EQ(q.exit_code, 0) << q.err;
        EXPECT_NE(q.out.find("rel L2"), std::string::npos);
        const CommandResult d = run_cli(dir, "dequant " + prefix + " --out " + output);
        ASSERT_EQ(d.exit_code, 0) << d.err;

        MxLayout layout;
        layout.format = format;
        layout.axis = axis < 0 ? axis + 3 : axis;
        layout.shape = shape;
        layout.mode = std::string(mode) == "floor" ? ScaleMode::floor : ScaleMode::rceil;
        base::HostTensor data(DType::e8m0, layout.data_file_shape());
        base::HostTensor scales(DType::e8m0, layout.scales_shape());
        const TensorView data_view = layout.data_view(data.view().data, data.bytes());
        const TensorView scales_view = layout.scales_view(scales.view().data, scales.bytes());
        ASSERT_TRUE(quantize(x.view(), data_view, scales_view, layout.axis, layout.mode));
        base::HostTensor want(DType::f32, shape);
        ASSERT_TRUE(dequantize(data_view, scales_view, layout.axis, want.view()));

        base::HostTensor got_data, got_scales, got;
        ASSERT_TRUE(read_npy(data_path(prefix), &got_data));
        ASSERT_TRUE(read_npy(scales_path(prefix), &got_scales));
        ASSERT_TRUE(read_npy(output, &got));
        ASSERT_EQ(got_data.view().shape_string(), data.view().shape_string());
        ASSERT_EQ(got_scales.view().shape_string(), scales.view().shape_string());
        EXPECT_EQ(std::memcmp(got_data.view().data, data.view().data, size_t(data.bytes())), 0);
        EXPECT_EQ(std::memcmp(got_scales.view().data, scales.view().data, size_t(scales.bytes())),
                  0);
        ASSERT_EQ(got.view().dtype, DType::f32);
        ASSERT_EQ(got.bytes(), want.bytes());
        EXPECT_EQ(std::memcmp(got.view().data, want.view().data, size_t(want.bytes())), 0);
      }
    }
  }
  // Half-precision output is the f32 result rounded once; a bf16 input reads as its exact values.
  const CommandResult d16 =
      run_cli(dir, "dequant " + prefix + " --out " + output + " --dtype bf16");
  ASSERT_EQ(d16.exit_code, 0) << d16.err;
  const CommandResult d32 = run_cli(dir, "dequant " + prefix + " --out " + dir.file("y32.npy"));
  ASSERT_EQ(d32.exit_code, 0) << d32.err;
  base::HostTensor y16, y32;
  ASSERT_TRUE(read_npy(output, &y16));
  ASSERT_TRUE(read_npy(dir.file("y32.npy"), &y32));
  ASSERT_EQ(y16.view().dtype, DType::bf16);
  for (int64_t i = 0; i < y32.numel(); ++i) {
    ASSERT_EQ(y16.data<uint16_t>()[i], base::float_to_bf16(y32.data<float>()[i])) << i;
  }
}

TEST(CliRun, FormatsTableComesFromTheCodecs) {
  const TempDir dir("cli_formats");
  const CommandResult table = run_cli(dir, "formats");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* cell : {"e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0", "448 (2^8.807)", "57344",
                           "7.5", "28", "1.03125", "0.78125", "0.53125", "2^-127"}) {
    EXPECT_NE(table.out.find(cell), std::string::npos) << cell;
  }
}

}  // namespace
}  // namespace mxattn::tools
