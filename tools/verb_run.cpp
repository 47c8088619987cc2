// `mxattn run`: one configured problem, timed, and verified against the f64 reference.
#include "cli.h"
#include "problem_flags.h"
#include "run_problem.h"
#include "verbs.h"

namespace mxattn::tools {

int verb_run(int argc, char** argv) {
  FlagParser flags(
      "run", "[flags]",
      "Runs one attention problem (random seeded inputs, or --q/--k/--v .npy files), prints\n"
      "the time, GFLOP/s and GB/s, and with --verify (the default) the max abs error,\n"
      "relative L2 error and cosine of O and LSE against the f64 reference, PASS or FAIL.\n"
      "With no flags: a decode step, B=1 Hq=32 Hkv=8 D=128, 8192 cached keys, MXFP8 K/V,\n"
      "split-KV auto.");
  workload::Spec spec = workload::decode_step();
  ProblemFlags problem(flags, &spec);
  RunSettings settings;
  int64_t threads = 0, repeat = 0;
  add_engine_flag(flags, &settings.engine);
  flags.add_int("threads", &threads, "CPU threads (0: all)");
  flags.add_int("repeat", &repeat, "timed runs (0: as many as fit in about half a second)");
  flags.add_bool("verify", &settings.verify, "check O and LSE against the f64 reference");
  flags.add_string("json", &settings.json_path, "FILE", "also write the results as JSON");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (std::optional<int> exit = problem.finish(flags)) return *exit;
  if (threads < 0 || repeat < 0) return flags.usage_error("--threads and --repeat must be >= 0");
  settings.threads = int(threads);
  settings.repeat = int(repeat);
  return run_problem(spec, settings, problem.inputs());
}

}  // namespace mxattn::tools
