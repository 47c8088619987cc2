// What `mxattn run` and `mxattn plan` do once their flags are parsed.
#pragma once

#include <string>

#include "mxattn/attention.h"
#include "workload/problem.h"

namespace mxattn::tools {

struct RunSettings {
  Engine engine = Engine::automatic;
  int threads = 0;
  int repeat = 0;  // timed runs; 0: as many as fit in about half a second (at least 3)
  bool verify = true;
  std::string json_path;  // where to write the results as JSON (empty: nowhere)
};

// Builds the workload, runs it, prints the problem, time, GFLOP/s and GB/s, and with verify the
// error of O and LSE against the f64 reference (and the quantization error apart). Returns the exit
// code: 0 when every check passes, 1 when one fails.
int run_problem(const workload::Spec& spec, const RunSettings& settings,
                const workload::Inputs& inputs = {});

// Prints the split partition of the problem: per query tile the key-tile range of each split, the
// exact counts, and the conservative per-row counts.
int print_plan(const workload::Spec& spec, Engine engine, int64_t max_tiles,
               const workload::Inputs& inputs = {});

}  // namespace mxattn::tools
