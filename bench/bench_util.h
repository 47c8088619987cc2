// What the benchmark programs share: the copy of a host tensor, comma-separated lists of
// names on the command line, the median of a run's times, and the JSON file each program writes
// with --json (nlohmann-json: NaN and infinities are written as null). Header only, so that the
// CUDA benchmarks include it too.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/host_tensor.h"
#include "mxattn/dtype.h"
#include "mxattn/tensor.h"

namespace mxattn::bench {

using Json = nlohmann::ordered_json;  // keys in the order written

using base::HostTensor;

// A contiguous copy of the contiguous view `v` (an absent view gives an absent tensor).
inline HostTensor copy_of(const TensorView& v) {
  if (!v.given()) return HostTensor();
  HostTensor t(v.dtype, std::vector<int64_t>(v.shape, v.shape + v.rank));
  std::memcpy(t.view().data, v.data, size_t(v.bytes));
  return t;
}

// The items of a comma-separated list, empty ones dropped.
inline std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) items.emplace_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return items;
}

// A flag's comma-separated list of element types, each of which `allowed` takes: the types, or
// the message for the flag parser's usage_error (naming the first that is not one of `what`).
inline std::optional<std::string> parse_dtypes(const std::string& flag, std::string_view text,
                                               const std::function<bool(DType)>& allowed,
                                               const std::string& what, std::vector<DType>* out) {
  out->clear();
  for (const std::string& name : split_list(text)) {
    const std::optional<DType> t = parse_dtype(name);
    if (!t || !allowed(*t)) return "--" + flag + ": '" + name + "' is not " + what;
    out->push_back(*t);
  }
  if (out->empty()) return "--" + flag + ": give at least one of " + what;
  return std::nullopt;
}

// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Whether `path` can be written, checked before a run so that a bad --json fails at once: it is
// opened for appending (and removed again where it did not exist). false after printing one line
// `program: cannot write PATH: reason` to stderr.
inline bool json_writable(const char* program, const std::string& path) {
  std::FILE* existing = std::fopen(path.c_str(), "r");
  if (existing != nullptr) std::fclose(existing);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", program, path.c_str(), std::strerror(errno));
    return false;
  }
  std::fclose(f);
  if (existing == nullptr) std::remove(path.c_str());
  return true;
}

// Writes `j` to `path`, indented. false after printing one line to stderr, as json_writable.
inline bool write_json(const char* program, const std::string& path, const Json& j) {
  std::ofstream out(path);
  if (out) out << j.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", program, path.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace mxattn::bench
