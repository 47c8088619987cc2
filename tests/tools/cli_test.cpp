// The flag parser of tools/cli.h and the literal reader behind .npy headers and quant's metadata.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "literal.h"

namespace mxattn::tools {
namespace {

enum class Color { red, green };

struct Parsed {
  std::optional<int> exit;
  std::string out;
  std::string err;
};

struct Fixture {
  std::string name = "default";
  std::string path;
  int64_t count = 3;
  double ratio = 0.5;
  bool verbose = false;
  std::vector<int64_t> sizes = {1, 2};
  Color color = Color::red;
  std::string input;
  FlagParser flags{"demo", "IN --path P [flags]", "A demo verb."};

  Fixture() {
    flags.add_positional("IN", &input, "input");
    flags.add_string("name", &name, "S", "a name");
    flags.add_string("path", &path, "P", "a path", true);
    flags.add_int("count", &count, "a count");
    flags.add_double("ratio", &ratio, "a ratio");
    flags.add_bool("verbose", &verbose, "talk more");
    flags.add_int_list("sizes", &sizes, "sizes");
    flags.add_choice("color", &color,
                     {{"red", Color::red}, {"green", Color::green}, {"g", Color::green}},
                     "a color");
  }

  Parsed parse(std::vector<std::string> args) {
    args.insert(args.begin(), "demo");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    std::ostringstream out, err;
    Parsed p;
    p.exit = flags.parse(int(argv.size()), argv.data(), out, err);
    p.out = out.str();
    p.err = err.str();
    return p;
  }
};

TEST(FlagParser, ParsesEveryKindInBothSpellings) {
  Fixture f;
  const Parsed p = f.parse({"--name", "x", "in.npy", "--path=a=b", "--count=-7", "--ratio", "1e-3",
                            "--verbose", "--sizes", "4,5,6", "--color=g"});
  EXPECT_FALSE(p.exit.has_value()) << p.err;
  EXPECT_EQ(f.name, "x");
  EXPECT_EQ(f.input, "in.npy");
  EXPECT_EQ(f.path, "a=b");
  EXPECT_EQ(f.count, -7);
  EXPECT_EQ(f.ratio, 1e-3);
  EXPECT_TRUE(f.verbose);
  EXPECT_EQ(f.sizes, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(f.color, Color::green);
  EXPECT_TRUE(p.err.empty());

  Fixture g;
  EXPECT_FALSE(g.parse({"--path", "p", "--verbose=false", "--", "--in"}).exit.has_value());
  EXPECT_FALSE(g.verbose);
  EXPECT_EQ(g.input, "--in");
}

TEST(FlagParser, HelpListsFlagsWithDefaults) {
  Fixture f;
  const Parsed p = f.parse({"--help"});
  ASSERT_EQ(p.exit, 0);
  EXPECT_NE(p.out.find("usage: mxattn demo IN --path P [flags]"), std::string::npos);
  for (const char* line :
       {"--count N", "(default 3)", "(default 0.5)", "(default false)", "(default 1,2)",
        "--color red|green|g", "(default red)", "--path P", "(required)", "--help", "IN"}) {
    EXPECT_NE(p.out.find(line), std::string::npos) << line;
  }
}

TEST(FlagParser, BadArgumentsGiveOneLineAndExitTwo) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"in", "--path", "p", "--nope"},
       "mxattn demo: unknown flag --nope (see mxattn demo --help)\n"},
      {{"in", "--path", "p", "--count", "3x"},
       "mxattn demo: --count expects an integer, not '3x'\n"},
      {{"in", "--path", "p", "--ratio", ""}, "mxattn demo: --ratio expects a number, not ''\n"},
      {{"in", "--path", "p", "--sizes", "1,,2"},
       "mxattn demo: --sizes expects a comma-separated list of integers, not '1,,2'\n"},
      {{"in", "--path", "p", "--color", "blue"},
       "mxattn demo: --color must be one of red|green|g, not 'blue'\n"},
      {{"in", "--path", "p", "--verbose=yes"},
       "mxattn demo: --verbose expects true or false, not 'yes'\n"},
      {{"in", "--path"}, "mxattn demo: --path needs a value (P)\n"},
      {{"in"}, "mxattn demo: --path is required (see mxattn demo --help)\n"},
      {{"--path", "p"}, "mxattn demo: missing IN (see mxattn demo --help)\n"},
      {{"in", "extra", "--path", "p"},
       "mxattn demo: unexpected argument 'extra' (see mxattn demo --help)\n"},
  };
  for (const auto& [args, message] : cases) {
    Fixture f;
    const Parsed p = f.parse(args);
    EXPECT_EQ(p.exit, 2) << message;
    EXPECT_EQ(p.err, message);
    EXPECT_TRUE(p.out.empty());
  }
}

TEST(Literal, ReadsNpyHeadersAndJson) {
  std::string error;
  const auto npy = parse_literal_dict(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", &error);
  ASSERT_TRUE(npy) << error;
  EXPECT_EQ(dict_string(*npy, "descr"), "<f4");
  EXPECT_EQ(dict_bool(*npy, "fortran_order"), false);
  EXPECT_EQ(dict_ints(*npy, "shape"), (std::vector<int64_t>{2, 3}));
  const auto one = parse_literal_dict("{'shape': (5,), 'descr': \"|u1\"}", &error);
  ASSERT_TRUE(one) << error;
  EXPECT_EQ(dict_ints(*one, "shape"), (std::vector<int64_t>{5}));
  const auto json =
      parse_literal_dict(R"({"format": "e2m3", "axis": 1, "shape": [], "ok": true})", &error);
  ASSERT_TRUE(json) << error;
  EXPECT_EQ(dict_int(*json, "axis"), 1);
  EXPECT_EQ(dict_ints(*json, "shape"), std::vector<int64_t>{});
  EXPECT_EQ(dict_bool(*json, "ok"), true);
  EXPECT_FALSE(dict_string(*json, "axis").has_value());

  for (const char* bad :
       {"", "{", "{'a' 1}", "{'a': (1, 'x')}", "{'a': 1} trailing", "{'a\\'': 1}", "{'a': 1,, }"}) {
    EXPECT_FALSE(parse_literal_dict(bad, &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
}

}  // namespace
}  // namespace mxattn::tools
