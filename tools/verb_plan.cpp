// `mxattn plan`: the split partition of a problem (SPEC 3), as the engines will run it.
#include "cli.h"
#include "problem_flags.h"
#include "run_problem.h"
#include "verbs.h"

namespace mxattn::tools {

int verb_plan(int argc, char** argv) {
  FlagParser flags(
      "plan", "[flags]",
      "Prints the split-KV partition of a problem: per query tile the key-tile range of\n"
      "each split, the exact valid-split count, and rocMLIR's conservative per-row counts.");
  workload::Config config;
  config.k_format = config.v_format = config.q_format = DType::f32;
  ProblemFlags problem(flags, &config);
  int64_t max_tiles = 64;
  flags.add_int("max-tiles", &max_tiles, "query tiles to print at most");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (std::optional<int> exit = problem.finish(flags)) return *exit;
  return print_plan(config, max_tiles, problem.inputs());
}

}  // namespace mxattn::tools
