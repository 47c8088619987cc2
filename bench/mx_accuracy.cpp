// Accuracy of MX attention (spec §9): the output of attention on quantized Q/K/V against the f64
// reference on the unquantized inputs, for every MX element format, without and with the producer
// transforms of spec §5 (Hadamard rotation of Q and K, K smoothing), beside bf16 and beside FP8 E4M3
// with one scale per tensor (the FlashAttention-3 / cuDNN FP8 recipe), on Gaussian inputs and on
// keys with a few large-magnitude channels. The problems come from the problem generator
// (src/workload: the draws, the transforms, the storage), attention runs through the public API, as
// a user's code calls it. Prints a table and, with --json FILE, writes the same numbers as JSON.
//
//   mxattn_mx_accuracy [--batch N] [--heads N] [--seq N] [--dim N] [--outlier X]
//                      [--scale-mode floor|rceil] [--engine fast|reference] [--threads N]
//                      [--seed N] [--json FILE]      (--help lists them)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cli.h"
#include "core/metrics.h"
#include "mxattn/attention.h"
#include "mxattn/mx.h"
#include "workload/problem.h"

namespace {

using mxattn::DType;
using mxattn::bench::HostTensor;
using mxattn::bench::Json;

struct Options {
  int64_t batch = 1, heads = 8, seq = 1024, dim = 128;
  double outlier = 20.0;
  mxattn::ScaleMode scale_mode = mxattn::ScaleMode::floor;
  mxattn::Engine engine = mxattn::Engine::cpu_fast;
  int64_t threads = 0;
  int64_t seed = 2026;
  std::string json_path;
};

// Error of O against the truth (spec §9): max abs error, relative L2 error, cosine similarity.
using mxattn::core::ErrorMetrics;

// How Q, K and V are stored.
enum class Storage {
  plain,           // f32 or bf16, no scale
  fp8_per_tensor,  // E4M3 with one f32 scale amax / 448 per tensor, simulated (see below)
  mx,              // MX codes with one E8M0 scale per 32 elements along the head dim
};

struct Format {
  const char* name;
  Storage storage;
  DType element;
};

constexpr Format kFormats[] = {
    {"f32", Storage::plain, DType::f32},
    {"bf16", Storage::plain, DType::bf16},
    {"FP8 E4M3 per-tensor", Storage::fp8_per_tensor, DType::e4m3},
    {"MXFP8 E4M3", Storage::mx, DType::e4m3},
    {"MXFP8 E5M2", Storage::mx, DType::e5m2},
    {"MXFP6 E2M3", Storage::mx, DType::e2m3},
    {"MXFP6 E3M2", Storage::mx, DType::e3m2},
    {"MXFP4 E2M1", Storage::mx, DType::e2m1},
};

// Producer-side transforms of spec §5; neither changes the exact output.
struct Transform {
  const char* name;
  bool rotate;
  bool smooth;
};

constexpr Transform kTransforms[] = {
    {"none", false, false},
    {"rotation", true, false},
    {"smoothing", false, true},
    {"rotation+smoothing", true, true},
};

// One kind of input: N(0, 1) Q, K and V drawn by the problem generator (src/workload) from the
// seed; with `outlier` != 0, channel 3 of every 32-channel block of K carries that common offset,
// so every MX block of a key holds one large channel.
struct Inputs {
  std::string name;
  float outlier = 0.0f;
  HostTensor truth;  // f64 reference on exactly the unquantized values
};

mxattn::workload::Spec input_spec(const Options& opt, float outlier) {
  mxattn::workload::Spec s;
  s.seed = uint64_t(opt.seed);
  s.batch = opt.batch;
  s.seq_q = s.seq_k = opt.seq;
  s.heads_q = s.heads_kv = opt.heads;
  s.dim_qk = s.dim_v = opt.dim;
  s.o_type = DType::f32;
  s.lse = false;
  s.split_kv = mxattn::AttentionArgs{}.split.split_kv;  // what a caller gets by default
  s.scale_mode = opt.scale_mode;
  s.k_outlier = outlier;
  return s;
}

[[noreturn]] void fail(const std::string& what, const mxattn::Status& st) {
  std::cerr << what << ": " << st.message() << "\n";
  std::exit(1);
}

// The largest finite E4M3 magnitude.
constexpr float kE4m3Max = 448.0f;

// x rounded to the nearest E4M3 value, ties to even (3 mantissa bits; below 2^-6 the subnormal
// steps of 2^-9), saturating at +-448.
float round_e4m3(float x) {
  const float a = std::fabs(x);
  if (a == 0.0f || !std::isfinite(a)) return x;
  const float step = std::ldexp(1.0f, std::max(std::ilogb(a), -6) - 3);
  return std::copysign(std::min(std::nearbyint(a / step) * step, kE4m3Max), x);
}

// The FlashAttention-3 / cuDNN FP8 recipe on a whole tensor: scale = amax / 448, every element
// rounded to E4M3 at x / scale, dequantized back to f32 so that attention sees exactly what an FP8
// kernel would multiply.
void simulate_fp8_per_tensor(const mxattn::TensorView& x) {
  float* values = static_cast<float*>(x.data);
  float amax = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) amax = std::max(amax, std::fabs(values[i]));
  if (amax == 0.0f) return;
  const float scale = amax / kE4m3Max;
  for (int64_t i = 0; i < x.numel(); ++i) values[i] = round_e4m3(values[i] / scale) * scale;
}

void run_attention(const mxattn::AttentionArgs& args, const Options& opt, mxattn::Engine engine) {
  mxattn::RunOptions run;
  run.engine = engine;
  run.threads = int(opt.threads);
  if (mxattn::Status st = mxattn::attention(args, run); !st) fail("attention", st);
}

mxattn::workload::Problem build(const mxattn::workload::Spec& spec) {
  mxattn::workload::Problem p;
  if (mxattn::Status st = mxattn::workload::Problem::build(spec, &p); !st) fail("problem", st);
  return p;
}

// The reference on the unquantized inputs of `in`.
void compute_truth(Inputs& in, const Options& opt) {
  const mxattn::workload::Problem p = build(input_spec(opt, in.outlier));
  in.truth = HostTensor(DType::f32, {opt.batch, opt.seq, opt.heads, opt.dim});
  run_attention(p.unquantized_args(in.truth.view(), {}), opt, mxattn::Engine::cpu_reference);
}

// What a producer does before handing Q/K/V to attention: transform, then store in `format`.
ErrorMetrics measure(const Inputs& in, const Format& format, const Transform& transform,
                     const Options& opt) {
  mxattn::workload::Spec spec = input_spec(opt, in.outlier);
  spec.hadamard = transform.rotate;
  spec.smooth_k = transform.smooth;
  spec.q_type = spec.k_type = spec.v_type =
      format.storage == Storage::fp8_per_tensor ? DType::f32 : format.element;
  const mxattn::workload::Problem p = build(spec);
  const mxattn::AttentionArgs& args = p.args();
  if (format.storage == Storage::fp8_per_tensor) {
    for (const mxattn::TensorView* x : {&args.q, &args.k, &args.v}) simulate_fp8_per_tensor(*x);
  }
  run_attention(args, opt, opt.engine);
  mxattn::core::ErrorAccumulator acc;
  for (int64_t i = 0; i < in.truth.numel(); ++i) {
    acc.add(in.truth.data<float>()[i], static_cast<const float*>(args.o.data)[i]);
  }
  return acc.result();
}

struct Row {
  const Format* format;
  const Transform* transform;
  std::string input;
  ErrorMetrics metrics;
};

const Row& find(const std::vector<Row>& rows, const std::string& format, const std::string& input,
                const std::string& transform) {
  for (const Row& r : rows) {
    if (format == r.format->name && input == r.input && transform == r.transform->name) return r;
  }
  std::cerr << "no result for " << format << " " << input << " " << transform << "\n";
  std::exit(1);
}

// A result of the simulation (B1 H8 S1024 D128) that set the accuracy targets below, beside the
// one measured here.
struct Comparison {
  const char* format;
  const char* input;
  const char* transform;
  double simulated_rel_l2;
};

constexpr Comparison kSimulated[] = {
    {"FP8 E4M3 per-tensor", "gaussian", "none", 0.047},  {"MXFP8 E4M3", "gaussian", "none", 0.052},
    {"FP8 E4M3 per-tensor", "k-outliers", "none", 0.28}, {"MXFP8 E4M3", "k-outliers", "none", 0.32},
    {"MXFP8 E4M3", "k-outliers", "rotation", 0.13},
};

// The accuracy targets, with rotation and/or smoothing on the outlier inputs: MXFP8 within 1.2x of
// its own Gaussian error, MXFP4 at most 0.25.
constexpr double kMxfp8OutlierRatioTarget = 1.2;
constexpr double kMxfp4RelL2Target = 0.25;

struct Verdict {
  std::string target, format, transform;
  double value = 0, limit = 0;
  bool met() const { return value <= limit; }
};

std::vector<Verdict> verdicts(const std::vector<Row>& rows) {
  std::vector<Verdict> out;
  for (const Transform& t : kTransforms) {
    if (!t.rotate && !t.smooth) continue;
    for (const char* mxfp8 : {"MXFP8 E4M3", "MXFP8 E5M2"}) {
      const double gaussian = find(rows, mxfp8, "gaussian", "none").metrics.rel_l2;
      const double outliers = find(rows, mxfp8, "k-outliers", t.name).metrics.rel_l2;
      out.push_back({"outlier rel L2 / Gaussian rel L2", mxfp8, t.name, outliers / gaussian,
                     kMxfp8OutlierRatioTarget});
    }
    out.push_back({"outlier rel L2", "MXFP4 E2M1", t.name,
                   find(rows, "MXFP4 E2M1", "k-outliers", t.name).metrics.rel_l2,
                   kMxfp4RelL2Target});
  }
  return out;
}

void print_table(const std::vector<Row>& rows, const std::vector<std::string>& inputs,
                 const char* title, double ErrorMetrics::*metric, const char* number_format) {
  std::printf("%s\n%-20s", title, "");
  for (const std::string& input : inputs) {
    std::printf(" | %-39s", (input == "gaussian" ? "Gaussian Q/K/V" : "K with outlier channels"));
  }
  std::printf("\n%-20s", "format");
  for (size_t i = 0; i < inputs.size(); ++i)
    std::printf(" | %9s %9s %9s %9s", "none", "rot", "smooth", "both");
  std::printf("\n");
  for (const Format& f : kFormats) {
    std::printf("%-20s", f.name);
    for (const std::string& input : inputs) {
      std::printf(" |");
      for (const Transform& t : kTransforms) {
        std::printf(" ");
        std::printf(number_format, find(rows, f.name, input, t.name).metrics.*metric);
      }
    }
    std::printf("\n");
  }
  std::printf("\n");
}

Json to_json(const Options& opt, const std::vector<Row>& rows, const std::vector<Verdict>& checks,
             double seconds) {
  Json results = Json::array(), simulated = Json::array(), targets = Json::array();
  for (const Row& r : rows) {
    results.push_back({{"format", r.format->name},
                       {"element", std::string(mxattn::name_of(r.format->element))},
                       {"input", r.input},
                       {"rotation", r.transform->rotate},
                       {"smoothing", r.transform->smooth},
                       {"rel_l2", r.metrics.rel_l2},
                       {"cosine", r.metrics.cosine},
                       {"max_abs", r.metrics.max_abs}});
  }
  for (const Comparison& c : kSimulated) {
    simulated.push_back(
        {{"format", c.format},
         {"input", c.input},
         {"transform", c.transform},
         {"simulated_rel_l2", c.simulated_rel_l2},
         {"measured_rel_l2", find(rows, c.format, c.input, c.transform).metrics.rel_l2}});
  }
  for (const Verdict& v : checks) {
    targets.push_back({{"target", v.target},
                       {"format", v.format},
                       {"transform", v.transform},
                       {"value", v.value},
                       {"limit", v.limit},
                       {"met", v.met()}});
  }
  return {{"benchmark", "mxattn_mx_accuracy"},
          {"shape",
           {{"batch", opt.batch},
            {"heads", opt.heads},
            {"seq_q", opt.seq},
            {"seq_k", opt.seq},
            {"dim", opt.dim}}},
          {"k_outlier_offset", opt.outlier},
          {"k_outlier_channels", "d % 32 == 3"},
          {"scale_mode", opt.scale_mode == mxattn::ScaleMode::floor ? "floor" : "rceil"},
          {"engine", opt.engine == mxattn::Engine::cpu_fast ? "cpu_fast" : "cpu_reference"},
          {"truth", "cpu_reference (f64) on the unquantized f32 inputs"},
          {"seed", opt.seed},
          {"seconds", seconds},
          {"results", results},
          {"simulation_comparison", simulated},
          {"targets", targets}};
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kProgram = "mxattn_mx_accuracy";
  Options opt;
  mxattn::tools::FlagParser flags = mxattn::tools::FlagParser::for_program(
      kProgram, "[flags]",
      "Error of attention on MX-quantized Q/K/V against the f64 reference on the unquantized\n"
      "inputs, per format and producer transform (Hadamard rotation, K smoothing).");
  flags.add_int("batch", &opt.batch, "batch size");
  flags.add_int("heads", &opt.heads, "heads of Q, K and V");
  flags.add_int("seq", &opt.seq, "query and key rows");
  flags.add_int("dim", &opt.dim, "head dim: a power of two, a multiple of 32");
  flags.add_double("outlier", &opt.outlier, "offset of K's outlier channels (d % 32 == 3)");
  flags.add_choice("scale-mode", &opt.scale_mode,
                   {{"floor", mxattn::ScaleMode::floor}, {"rceil", mxattn::ScaleMode::rceil}},
                   "how an MX block's scale follows from its largest magnitude");
  flags.add_choice(
      "engine", &opt.engine,
      {{"fast", mxattn::Engine::cpu_fast}, {"reference", mxattn::Engine::cpu_reference}},
      "the engine measured (the truth is always the reference)");
  flags.add_int("threads", &opt.threads, "CPU threads (0: all)");
  flags.add_int("seed", &opt.seed, "seed of the random inputs");
  flags.add_string("json", &opt.json_path, "FILE", "also write the results here as JSON");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (opt.batch < 1 || opt.heads < 1 || opt.seq < 1) {
    return flags.usage_error("--batch, --heads and --seq must be at least 1");
  }
  if (opt.dim < mxattn::kMxBlock || (opt.dim & (opt.dim - 1)) != 0) {
    return flags.usage_error(
        "--dim must be a power of two and a multiple of 32 (the Hadamard "
        "rotation and the MX blocks)");
  }
  if (opt.threads < 0) return flags.usage_error("--threads must be 0 (all) or more");
  if (!opt.json_path.empty() && !mxattn::bench::json_writable(kProgram, opt.json_path)) return 1;

  const auto t0 = std::chrono::steady_clock::now();
  std::printf(
      "mxattn MX accuracy: B%lld H%lld S%lld D%lld, seed %lld, scale mode %s, engine %s;\n"
      "error of O against the f64 reference on the unquantized inputs; K outliers: +%g on channels"
      " d %% 32 == 3\n\n",
      static_cast<long long>(opt.batch), static_cast<long long>(opt.heads),
      static_cast<long long>(opt.seq), static_cast<long long>(opt.dim),
      static_cast<long long>(opt.seed),
      opt.scale_mode == mxattn::ScaleMode::floor ? "floor" : "rceil",
      opt.engine == mxattn::Engine::cpu_fast ? "cpu_fast" : "cpu_reference", opt.outlier);

  std::vector<Inputs> inputs(2);
  inputs[0].name = "gaussian";
  inputs[1].name = "k-outliers";
  inputs[1].outlier = float(opt.outlier);
  std::vector<std::string> input_names;
  std::vector<Row> rows;
  for (Inputs& in : inputs) {
    compute_truth(in, opt);
    input_names.push_back(in.name);
    for (const Format& f : kFormats) {
      for (const Transform& t : kTransforms)
        rows.push_back({&f, &t, in.name, measure(in, f, t, opt)});
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  print_table(rows, input_names, "Relative L2 error of O (lower is better)", &ErrorMetrics::rel_l2,
              "%9.4f");
  print_table(rows, input_names, "Cosine similarity of O (higher is better)", &ErrorMetrics::cosine,
              "%9.6f");

  std::printf("Beside the simulation that set the targets (B1 H8 S1024 D128):\n");
  for (const Comparison& c : kSimulated) {
    std::printf("  %-20s %-11s %-9s simulated %.3f  measured %.4f\n", c.format, c.input,
                c.transform, c.simulated_rel_l2,
                find(rows, c.format, c.input, c.transform).metrics.rel_l2);
  }
  const std::vector<Verdict> checks = verdicts(rows);
  std::printf("\nTargets (K-outlier inputs):\n");
  for (const Verdict& v : checks) {
    std::printf("  %-11s %-19s %-33s %.3f <= %.2f: %s\n", v.format.c_str(), v.transform.c_str(),
                v.target.c_str(), v.value, v.limit, v.met() ? "met" : "NOT met");
  }
  std::printf("\n%.1f s\n", seconds);
  if (!opt.json_path.empty() &&
      !mxattn::bench::write_json(kProgram, opt.json_path, to_json(opt, rows, checks, seconds))) {
    return 1;
  }
  return 0;
}
