// The flag parser every verb of the command line uses: long flags (`--name value`, `--name=value`),
// booleans, lists (`1,2,3`), enum choices, positional arguments and `--help` listing each flag with
// its default. A bad argument prints ONE line `mxattn VERB: <what is wrong>` and gives exit code 2.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mxattn::tools {

// Exit codes of every verb.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the work itself failed (a file, a check)
inline constexpr int kExitUsage = 2;    // bad command-line arguments

class FlagParser {
 public:
  // `usage` follows "mxattn VERB " in the help, e.g. "IN.npy --format F --out PREFIX [flags]".
  FlagParser(std::string verb, std::string usage, std::string description);
  // A program of its own (a benchmark): `program` stands where "mxattn VERB" stands for a verb.
  static FlagParser for_program(std::string program, std::string usage, std::string description);

  // Each flag writes into `target`, whose value at registration is the default shown by --help.
  void add_string(std::string name, std::string* target, std::string value_name, std::string help,
                  bool required = false);
  void add_int(std::string name, int64_t* target, std::string help);
  void add_double(std::string name, double* target, std::string help);
  // `--name` sets true; `--name=true|false|1|0` sets either.
  void add_bool(std::string name, bool* target, std::string help);
  void add_int_list(std::string name, std::vector<int64_t>* target, std::string help);

  // One of a fixed set of words; several words may name the same value (aliases).
  // With `bare_word`, the flag may also stand alone (`--causal`), meaning that word; a value then
  // needs the `--name=value` form.
  template <class T>
  void add_choice(std::string name, T* target, std::vector<std::pair<std::string, T>> words,
                  std::string help, bool required = false, std::string bare_word = "") {
    std::string names, default_word;
    for (const auto& [word, value] : words) {
      if (!names.empty()) names += '|';
      names += word;
      if (default_word.empty() && value == *target) default_word = word;
    }
    const bool bare = !bare_word.empty();
    add_flag(
        std::move(name), bare ? "[=" + names + "]" : names, std::move(help), default_word, !bare,
        [target, words, names, bare_word](std::string_view text) -> std::optional<std::string> {
          if (!bare_word.empty() && text == "true") text = bare_word;
          for (const auto& [word, value] : words) {
            if (text == word) {
              *target = value;
              return std::nullopt;
            }
          }
          return "must be one of " + names + ", not '" + std::string(text) + "'";
        },
        required);
  }

  // A required positional argument, in order of registration.
  void add_positional(std::string name, std::string* target, std::string help);

  // Parses argv[1..argc) (argv[0] is the verb). nullopt: go on; a value: the verb should return it
  // (0 after --help, 2 after a bad argument, whose one-line message went to `err`).
  std::optional<int> parse(int argc, char** argv, std::ostream& out, std::ostream& err);
  std::optional<int> parse(int argc, char** argv);

  // Prints `mxattn VERB: message` to `err` and returns kExitUsage (for checks made after parsing).
  int usage_error(const std::string& message, std::ostream& err) const;
  int usage_error(const std::string& message) const;

  void print_help(std::ostream& out) const;

 private:
  using Setter = std::function<std::optional<std::string>(std::string_view)>;
  struct Flag {
    std::string name;
    std::string value_name;  // empty for booleans
    std::string help;
    std::string default_text;
    bool required = false;
    bool takes_value = true;
    bool seen = false;
    Setter set;
  };
  struct Positional {
    std::string name;
    std::string help;
    std::string* target;
  };

  void add_flag(std::string name, std::string value_name, std::string help,
                std::string default_text, bool takes_value, Setter set, bool required = false);
  Flag* find(std::string_view name);

  std::string command_;  // "mxattn VERB", or a program's name
  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
};

// "1,2,3" with separator ","
std::string join_ints(const std::vector<int64_t>& values, std::string_view separator);

// "[1, 1024, 8, 4]"
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace mxattn::tools
