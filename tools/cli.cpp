#include "cli.h"

#include <charconv>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace mxattn::tools {
namespace {

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string join_ints(const std::vector<int64_t>& values, std::string_view separator) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) text += separator;
    text += std::to_string(values[i]);
  }
  return text;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  text += join_ints(shape, ", ");
  return text += "]";
}

FlagParser::FlagParser(std::string verb, std::string usage, std::string description)
    : command_("mxattn " + verb), usage_(std::move(usage)), description_(std::move(description)) {}

FlagParser FlagParser::for_program(std::string program, std::string usage,
                                   std::string description) {
  FlagParser parser("", std::move(usage), std::move(description));
  parser.command_ = std::move(program);
  return parser;
}

void FlagParser::add_flag(std::string name, std::string value_name, std::string help,
                          std::string default_text, bool takes_value, Setter set, bool required) {
  Flag flag;
  flag.name = std::move(name);
  flag.value_name = std::move(value_name);
  flag.help = std::move(help);
  flag.default_text = std::move(default_text);
  flag.takes_value = takes_value;
  flag.required = required;
  flag.set = std::move(set);
  flags_.push_back(std::move(flag));
}

void FlagParser::add_string(std::string name, std::string* target, std::string value_name,
                            std::string help, bool required) {
  add_flag(
      std::move(name), std::move(value_name), std::move(help), *target, true,
      [target](std::string_view text) -> std::optional<std::string> {
        *target = std::string(text);
        return std::nullopt;
      },
      required);
}

void FlagParser::add_int(std::string name, int64_t* target, std::string help) {
  add_flag(std::move(name), "N", std::move(help), std::to_string(*target), true,
           [target](std::string_view text) -> std::optional<std::string> {
             const std::optional<int64_t> value = parse_int(text);
             if (!value) return "expects an integer, not '" + std::string(text) + "'";
             *target = *value;
             return std::nullopt;
           });
}

void FlagParser::add_double(std::string name, double* target, std::string help) {
  std::ostringstream default_text;
  default_text << *target;
  add_flag(std::move(name), "X", std::move(help), default_text.str(), true,
           [target](std::string_view text) -> std::optional<std::string> {
             const std::optional<double> value = parse_double(text);
             if (!value) return "expects a number, not '" + std::string(text) + "'";
             *target = *value;
             return std::nullopt;
           });
}

void FlagParser::add_bool(std::string name, bool* target, std::string help) {
  add_flag(std::move(name), "", std::move(help), *target ? "true" : "false", false,
           [target](std::string_view text) -> std::optional<std::string> {
             if (text == "true" || text == "1") {
               *target = true;
             } else if (text == "false" || text == "0") {
               *target = false;
             } else {
               return "expects true or false, not '" + std::string(text) + "'";
             }
             return std::nullopt;
           });
}

void FlagParser::add_int_list(std::string name, std::vector<int64_t>* target, std::string help) {
  add_flag(std::move(name), "N,N,...", std::move(help), join_ints(*target, ","), true,
           [target](std::string_view text) -> std::optional<std::string> {
             std::vector<int64_t> values;
             size_t begin = 0;
             while (begin <= text.size()) {
               const size_t comma = std::min(text.find(',', begin), text.size());
               const std::optional<int64_t> value = parse_int(text.substr(begin, comma - begin));
               if (!value) {
                 return "expects a comma-separated list of integers, not '" + std::string(text) +
                        "'";
               }
               values.push_back(*value);
               begin = comma + 1;
             }
             *target = std::move(values);
             return std::nullopt;
           });
}

void FlagParser::add_positional(std::string name, std::string* target, std::string help) {
  positionals_.push_back({std::move(name), std::move(help), target});
}

FlagParser::Flag* FlagParser::find(std::string_view name) {
  for (Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

int FlagParser::usage_error(const std::string& message, std::ostream& err) const {
  err << command_ << ": " << message << "\n";
  return kExitUsage;
}

int FlagParser::usage_error(const std::string& message) const {
  return usage_error(message, std::cerr);
}

std::optional<int> FlagParser::parse(int argc, char** argv) {
  return parse(argc, argv, std::cout, std::cerr);
}

std::optional<int> FlagParser::parse(int argc, char** argv, std::ostream& out, std::ostream& err) {
  size_t positional = 0;
  bool only_positionals = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (only_positionals || !arg.starts_with("--") || arg.size() == 2) {
      if (!only_positionals && arg == "--") {
        only_positionals = true;
        continue;
      }
      if (positional >= positionals_.size()) {
        return usage_error(
            "unexpected argument '" + std::string(arg) + "' (see " + command_ + " --help)", err);
      }
      *positionals_[positional++].target = std::string(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string_view name =
        arg.substr(2, equals == std::string_view::npos ? arg.npos : equals - 2);
    if (name == "help") {
      print_help(out);
      return kExitOk;
    }
    Flag* flag = find(name);
    if (!flag) {
      return usage_error("unknown flag --" + std::string(name) + " (see " + command_ + " --help)",
                         err);
    }
    std::string_view value;
    if (equals != std::string_view::npos) {
      value = arg.substr(equals + 1);
    } else if (!flag->takes_value) {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return usage_error("--" + flag->name + " needs a value (" + flag->value_name + ")", err);
    }
    if (const std::optional<std::string> problem = flag->set(value)) {
      return usage_error("--" + flag->name + " " + *problem, err);
    }
    flag->seen = true;
  }
  for (const Flag& flag : flags_) {
    if (flag.required && !flag.seen) {
      return usage_error("--" + flag.name + " is required (see " + command_ + " --help)", err);
    }
  }
  if (positional < positionals_.size()) {
    return usage_error(
        "missing " + positionals_[positional].name + " (see " + command_ + " --help)", err);
  }
  return std::nullopt;
}

void FlagParser::print_help(std::ostream& out) const {
  out << "usage: " << command_ << " " << usage_ << "\n\n" << description_ << "\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Positional& p : positionals_) rows.emplace_back(p.name, p.help);
  for (const Flag& flag : flags_) {
    std::string left = "--" + flag.name + (flag.value_name.empty() ? "" : " " + flag.value_name);
    std::string right = flag.help;
    if (flag.required) {
      right += " (required)";
    } else if (!flag.default_text.empty()) {
      right += " (default " + flag.default_text + ")";
    }
    rows.emplace_back(std::move(left), std::move(right));
  }
  rows.emplace_back("--help", "print this help");
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  out << "\narguments:\n";
  for (const auto& [left, right] : rows) {
    out << "  " << std::left << std::setw(int(width)) << left << "  " << right << "\n";
  }
}

}  // namespace mxattn::tools
