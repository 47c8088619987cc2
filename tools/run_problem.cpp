#include "run_problem.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "api/engines.h"
#include "base/host_tensor.h"
#include "core/metrics.h"
#include "core/plan.h"
#include "core/problem.h"
#include "progress.h"
#include "runner.h"
#include "verify.h"

namespace mxattn::tools {
namespace {

// Largest error an output may show against the f64 reference, by its storage type: the rounding of
// the stored result dominates, plus f32 accumulation.
double o_tolerance(DType o) {
  return o == DType::f32 ? 1e-5 : o == DType::f16 ? 2e-3 : 1e-2;
}
constexpr double kLseTolerance = 1e-3;

struct Check {
  const char* name;
  core::ErrorMetrics m;
  bool pass;
};

void print_check(const Check& c) {
  std::printf("  %-4s max_abs %.3e  rel_l2 %.3e  cosine %.7f  non-finite mismatches %lld  %s\n",
              c.name, c.m.max_abs, c.m.rel_l2, c.m.cosine,
              static_cast<long long>(c.m.mismatched_nonfinite), c.pass ? "PASS" : "FAIL");
}

// The runner for the requested engine. `automatic` takes the GPU where there is one and the CUDA
// engine supports the problem, else the fast CPU engine.
Status pick_runner(workload::Problem& w, const RunSettings& settings,
                   std::unique_ptr<Runner>* out) {
  if (settings.engine == Engine::cuda) return make_cuda_runner(w, out);
  if (settings.engine == Engine::automatic && gpu_present()) {
    const Status st = make_cuda_runner(w, out);
    if (st || st.code() != ErrorCode::unsupported) return st;
    std::printf("note:    the CUDA engine does not run this problem (%s); using the CPU\n",
                st.message().c_str());
  }
  const Engine cpu =
      settings.engine == Engine::cpu_reference ? Engine::cpu_reference : Engine::cpu_fast;
  *out = make_cpu_runner(w, cpu, settings.threads);
  return Status::ok();
}

}  // namespace

int run_problem(const workload::Spec& spec, const RunSettings& settings,
                const workload::Inputs& inputs) {
  workload::Problem w;
  if (Status st = workload::Problem::build(spec, &w, inputs); !st) {
    std::fprintf(stderr, "mxattn run: %s\n", st.message().c_str());
    return 2;
  }
  std::printf("problem: %s\n", w.describe().c_str());
  std::unique_ptr<Runner> runner;
  const auto fail = [](const Status& st) {
    std::fprintf(stderr, "mxattn run: %s\n", st.message().c_str());
    return st.code() == ErrorCode::invalid_argument ? 2 : 1;
  };
  if (Status st = pick_runner(w, settings, &runner); !st) return fail(st);
  std::printf("engine:  %s\n", runner->name());

  // One untimed run (warm-up), then as many timed runs as asked for.
  double first = 0;
  if (Status st = runner->run(&first); !st) return fail(st);
  if (Status st = runner->run(&first); !st) return fail(st);
  int repeat = settings.repeat;
  if (repeat <= 0) repeat = std::clamp(int(0.5 / std::max(first, 1e-6)), 3, 1000);
  std::vector<double> times;
  {
    ProgressBar bar("timing", repeat);
    for (int r = 0; r < repeat; ++r) {
      double t = 0;
      if (Status st = runner->run(&t); !st) return fail(st);
      times.push_back(t);
      bar.update(r + 1);
    }
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double gflops = w.flops() / median * 1e-9;
  const double gbytes = w.min_bytes() / median * 1e-9;
  std::printf("time:    %.4f ms median of %d runs (min %.4f ms)\n", median * 1e3, repeat,
              times.front() * 1e3);
  std::printf("rate:    %.1f GFLOP/s, %.2f GB/s (%.3g GFLOP, %.3g MB moved at least)\n", gflops,
              gbytes, w.flops() * 1e-9, w.min_bytes() * 1e-6);

  bool pass = true;
  std::vector<Check> checks;
  if (settings.verify) {
    // The verified output is the engine's, rerun once more after poisoning.
    double t = 0;
    if (Status st = runner->poison_outputs(); !st) return fail(st);
    if (Status st = runner->run(&t); !st) return fail(st);
    if (Status st = runner->fetch_outputs(); !st) return fail(st);
    const workload::Spec& c = w.spec();
    base::HostTensor o_ref(DType::f32, {c.batch, c.seq_q, c.heads_q, c.dim_v});
    base::HostTensor lse_ref(DType::f32, {c.batch, c.heads_q, c.seq_q});
    AttentionArgs ref = w.args();
    ref.o = o_ref.view();
    ref.lse = lse_ref.view();
    ref.split = SplitOptions{};
    RunOptions ref_options;
    ref_options.engine = Engine::cpu_reference;
    if (Status st = attention(ref, ref_options); !st) {
      std::fprintf(stderr, "mxattn run: reference: %s\n", st.message().c_str());
      return 2;
    }
    // The reference on the unquantized inputs (dense KV): where its outputs are finite, the
    // engine's must be too; against the stored inputs' reference, the quantization error apart.
    base::HostTensor o_src(DType::f32, {c.batch, c.seq_q, c.heads_q, c.dim_v});
    base::HostTensor lse_src(DType::f32, {c.batch, c.heads_q, c.seq_q});
    AttentionArgs src = w.unquantized_args(o_src.view(), lse_src.view());
    src.split = SplitOptions{};
    if (Status st = attention(src, ref_options); !st) {
      std::fprintf(stderr, "mxattn run: reference: %s\n", st.message().c_str());
      return 2;
    }
    const core::ErrorMetrics mo = compare_outputs(o_ref.view(), w.args().o, o_src.view());
    checks.push_back({"O", mo, mo.rel_l2 <= o_tolerance(c.o_type) && mo.mismatched_nonfinite == 0});
    if (w.args().lse.given()) {
      const core::ErrorMetrics ml = compare_outputs(lse_ref.view(), w.args().lse, lse_src.view());
      checks.push_back({"LSE", ml, ml.max_abs <= kLseTolerance && ml.mismatched_nonfinite == 0});
    }
    std::printf("verify against the f64 reference (seed %llu):\n",
                static_cast<unsigned long long>(c.seed));
    for (const Check& ch : checks) {
      print_check(ch);
      pass = pass && ch.pass;
    }
    if (c.q_type != DType::f32 || c.k_type != DType::f32 || c.v_type != DType::f32) {
      const core::ErrorMetrics q = compare_outputs(o_src.view(), o_ref.view(), o_src.view());
      std::printf(
          "quantization error of O (reference on unquantized vs stored inputs): rel_l2 %.3e  "
          "cosine %.7f\n",
          q.rel_l2, q.cosine);
    }
    std::printf("result:  %s\n", pass ? "PASS" : "FAIL");
  }

  if (!settings.json_path.empty()) {
    std::ofstream js(settings.json_path);
    js << "{\n  \"problem\": \"" << w.describe() << "\",\n  \"engine\": \"" << runner->name()
       << "\",\n  \"median_ms\": " << median * 1e3 << ",\n  \"min_ms\": " << times.front() * 1e3
       << ",\n  \"gflops\": " << gflops << ",\n  \"gbytes_per_s\": " << gbytes
       << ",\n  \"checks\": [";
    for (size_t i = 0; i < checks.size(); ++i) {
      js << (i ? ", " : "") << "{\"output\": \"" << checks[i].name
         << "\", \"max_abs\": " << checks[i].m.max_abs << ", \"rel_l2\": " << checks[i].m.rel_l2
         << ", \"cosine\": " << checks[i].m.cosine
         << ", \"pass\": " << (checks[i].pass ? "true" : "false") << "}";
    }
    js << "]\n}\n";
  }
  return pass ? 0 : 1;
}

int print_plan(const workload::Spec& spec, Engine engine, int64_t max_tiles,
               const workload::Inputs& inputs) {
  workload::Problem w;
  if (Status st = workload::Problem::build(spec, &w, inputs); !st) {
    std::fprintf(stderr, "mxattn plan: %s\n", st.message().c_str());
    return 2;
  }
  core::Problem p;
  if (Status st = core::validate_problem(w.args(), &p); !st) {
    std::fprintf(stderr, "mxattn plan: %s\n", st.message().c_str());
    return 2;
  }
  // The engine `mxattn run` would take: with `auto`, the CUDA path where there is a GPU and it
  // supports the problem, else the fast CPU engine.
  api::EngineKind kind = api::EngineKind::cpu_fast;
  const bool gpu = engine == Engine::cuda || (engine == Engine::automatic && gpu_present());
  if (Status st = api::choose_engine(p, gpu ? Engine::cuda : engine, gpu, &kind); !st) {
    std::fprintf(stderr, "mxattn plan: %s\n", st.message().c_str());
    return 2;
  }
  if (Status st = api::check_support(p, kind); !st) {
    if (engine != Engine::automatic) {
      std::fprintf(stderr, "mxattn plan: %s\n", st.message().c_str());
      return 2;
    }
    std::printf("note:    the CUDA engine does not run this problem (%s); using the CPU\n",
                st.message().c_str());
    kind = api::EngineKind::cpu_fast;
  }
  const core::SplitParams s = api::split_params(p, kind);
  std::printf("problem: %s\n", w.describe().c_str());
  std::printf("engine:  %s\n", api::name_of(kind).data());
  std::printf("plan:    tile_m=%lld rows, tile_n=%lld keys, split_kv=%s",
              static_cast<long long>(s.tile_m), static_cast<long long>(s.tile_n),
              s.split_kv == 0 ? "auto" : std::to_string(s.split_kv).c_str());
  if (s.split_kv == 0) {
    std::printf(" (%lld key tiles per split, at most %lld splits)",
                static_cast<long long>(s.target_tiles_per_split),
                static_cast<long long>(s.max_splits));
  }
  std::printf(", %lld partial slots\n", static_cast<long long>(core::partial_slots(p, s)));

  int64_t shown = 0;
  const int64_t tiles = core::query_tiles_per_head(p, s);
  // Heads share a partition unless the sparse layout differs per head.
  const int64_t heads = p.sparse ? p.heads_q : 1;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < tiles; ++t) {
        if (shown++ == max_tiles) {
          std::printf("... (more tiles: raise --max-tiles)\n");
          return 0;
        }
        const core::QueryTile q = core::query_tile(p, s, b, h, t);
        std::printf(
            "b=%lld h=%s tile %lld rows [%lld, %lld]: %lld key tiles, split_kv %lld, exact count "
            "%lld\n",
            static_cast<long long>(b), p.sparse ? std::to_string(h).c_str() : "*",
            static_cast<long long>(t), static_cast<long long>(q.row_first),
            static_cast<long long>(q.row_last), static_cast<long long>(q.run.count),
            static_cast<long long>(q.splits), static_cast<long long>(q.count));
        for (int64_t sp = 0; sp < q.splits; ++sp) {
          const core::TileRun r = core::split_tiles(q.run, q.splits, sp);
          if (r.count == 0) {
            std::printf("    split %lld: empty\n", static_cast<long long>(sp));
            continue;
          }
          const int64_t first = q.key_tile(r.begin), last = q.key_tile(r.begin + r.count - 1);
          std::printf("    split %lld: key tiles %lld..%lld (%lld tiles), keys [%lld, %lld]\n",
                      static_cast<long long>(sp), static_cast<long long>(first),
                      static_cast<long long>(last), static_cast<long long>(r.count),
                      static_cast<long long>(first * s.tile_n),
                      static_cast<long long>((last + 1) * s.tile_n - 1));
        }
        std::printf("    conservative per-row counts:");
        for (int64_t i = q.row_first; i <= q.row_last; ++i) {
          std::printf(" %lld", static_cast<long long>(
                                   core::conservative_split_count(q.vis, i, s.tile_n, q.splits)));
        }
        std::printf("\n");
      }
    }
  }
  return 0;
}

}  // namespace mxattn::tools
