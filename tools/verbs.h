// The verbs of the `mxattn` command line. Each is a small program: argv[0] is the verb's name, the
// return value the exit code (see cli.h). Adding a verb: declare it here and add a row to the table
// in main.cpp.
#pragma once

namespace mxattn::tools {

int verb_quant(int argc, char** argv);
int verb_dequant(int argc, char** argv);
int verb_formats(int argc, char** argv);
int verb_run(int argc, char** argv);
int verb_plan(int argc, char** argv);
int verb_dist(int argc, char** argv);

}  // namespace mxattn::tools
