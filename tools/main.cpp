// `mxattn VERB [arguments]`: dispatches to the verbs of verbs.h.
#include <iomanip>
#include <iostream>
#include <string_view>

#include "cli.h"
#include "mxattn/build_info.h"
#include "verbs.h"

namespace {

struct Verb {
  std::string_view name;
  int (*run)(int argc, char** argv);
  std::string_view summary;
};

constexpr Verb kVerbs[] = {
    {"run", mxattn::tools::verb_run,
     "run one attention problem, timed and verified against the reference"},
    {"plan", mxattn::tools::verb_plan, "print the split-KV partition of a problem"},
    {"dist", mxattn::tools::verb_dist,
     "sequence-parallel attention over MPI or NCCL ranks (under mpirun)"},
    {"quant", mxattn::tools::verb_quant, "quantize a .npy tensor to an MX format"},
    {"dequant", mxattn::tools::verb_dequant, "dequantize the files written by quant to a .npy"},
    {"formats", mxattn::tools::verb_formats, "print the range and precision of each MX format"},
};

void print_help(std::ostream& out) {
  out << "usage: mxattn VERB [arguments]    (mxattn VERB --help for a verb's arguments)\n\n"
      << "Exact multi-head attention over plain and OCP MX microscaled inputs.\n\nverbs:\n";
  for (const Verb& verb : kVerbs) {
    out << "  " << std::left << std::setw(10) << verb.name << verb.summary << "\n";
  }
  out << "\n  --help     print this help\n  --version  print the version\n";
}

// The version and what this build holds (mxattn::build_info).
void print_version(std::ostream& out) {
  const mxattn::BuildInfo info = mxattn::build_info();
  out << "mxattn " << info.version << "\n  CPU kernel sets: ";
  for (size_t i = 0; i < info.cpu_kernel_sets.size(); ++i) {
    out << (i ? ", " : "") << info.cpu_kernel_sets[i];
  }
  out << " (runs " << info.cpu_kernel_set << ")\n  CUDA engines: ";
  if (info.cuda) {
    out << "decode" << (info.cuda_prefill ? ", prefill" : "") << " (CUDA architectures "
        << info.cuda_architectures << ")\n";
  } else {
    out << "not built\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_help(std::cerr);
    return mxattn::tools::kExitUsage;
  }
  const std::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_help(std::cout);
    return mxattn::tools::kExitOk;
  }
  if (first == "--version") {
    print_version(std::cout);
    return mxattn::tools::kExitOk;
  }
  for (const Verb& verb : kVerbs) {
    if (verb.name == first) return verb.run(argc - 1, argv + 1);
  }
  std::cerr << "mxattn: unknown verb '" << first << "' (see mxattn --help)\n";
  return mxattn::tools::kExitUsage;
}
