// `mxattn plan`: the split partition of a problem (spec §3), as the engines will run it.
#include "cli.h"
#include "problem_flags.h"
#include "run_problem.h"
#include "verbs.h"

namespace mxattn::tools {

int verb_plan(int argc, char** argv) {
  FlagParser flags(
      "plan", "[flags]",
      "Prints the split-KV partition of a problem as the engine that runs it splits it: per\n"
      "query tile the key-tile range of each split, the exact valid-split count, and\n"
      "rocMLIR's conservative per-row counts. Takes the same problem flags and defaults as\n"
      "`mxattn run`.");
  workload::Spec spec = workload::decode_step();
  ProblemFlags problem(flags, &spec);
  Engine engine = Engine::automatic;
  add_engine_flag(flags, &engine);
  int64_t max_tiles = 64;
  flags.add_int("max-tiles", &max_tiles, "query tiles to print at most");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (std::optional<int> exit = problem.finish(flags)) return *exit;
  return print_plan(spec, engine, max_tiles, problem.inputs());
}

}  // namespace mxattn::tools
