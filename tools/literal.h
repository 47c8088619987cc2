// Flat dictionaries in the two literal syntaxes the command line reads: the Python dict of a .npy
// header ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }) and JSON objects
// ({"format": "e4m3", "shape": [2, 3]}). Values are strings, booleans, integers or lists of
// integers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mxattn::tools {

using LiteralValue = std::variant<std::string, bool, int64_t, std::vector<int64_t>>;
using LiteralDict = std::map<std::string, LiteralValue, std::less<>>;

// Parses a whole dictionary; on failure returns nullopt and says why in *error.
std::optional<LiteralDict> parse_literal_dict(std::string_view text, std::string* error);

// Typed lookups: nullopt when the key is missing or holds another type.
std::optional<std::string> dict_string(const LiteralDict& dict, std::string_view key);
std::optional<bool> dict_bool(const LiteralDict& dict, std::string_view key);
std::optional<int64_t> dict_int(const LiteralDict& dict, std::string_view key);
std::optional<std::vector<int64_t>> dict_ints(const LiteralDict& dict, std::string_view key);

}  // namespace mxattn::tools
