#include "literal.h"

#include <cctype>
#include <charconv>

namespace mxattn::tools {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  std::optional<LiteralDict> dict(std::string* error) {
    LiteralDict result;
    if (!consume('{')) return fail("expected '{'", error);
    while (!consume('}')) {
      std::string key;
      if (!string(&key)) return fail("expected a quoted key", error);
      if (!consume(':')) return fail("expected ':' after '" + key + "'", error);
      std::optional<LiteralValue> v = value();
      if (!v) return fail("cannot read the value of '" + key + "'", error);
      result.insert_or_assign(std::move(key), std::move(*v));
      if (!consume(',')) {
        if (!consume('}')) return fail("expected ',' or '}'", error);
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) return fail("unexpected text after the closing '}'", error);
    return result;
  }

 private:
  std::optional<LiteralDict> fail(const std::string& what, std::string* error) const {
    *error = what + " at character " + std::to_string(pos_);
    return std::nullopt;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool consume_word(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // A quoted string without escapes (none of the keys and values read here need them).
  bool string(std::string* out) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_];
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    const std::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) return false;
    *out = std::string(body);
    pos_ = end + 1;
    return true;
  }

  std::optional<int64_t> integer() {
    skip_space();
    int64_t value = 0;
    const char* begin = text_.data() + pos_;
    const auto [ptr, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
    if (ec != std::errc() || ptr == begin) return std::nullopt;
    pos_ += size_t(ptr - begin);
    // Files written by Python 2 spell long integers "3L".
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return value;
  }

  std::optional<std::vector<int64_t>> int_list(char close) {
    std::vector<int64_t> values;
    while (!consume(close)) {
      std::optional<int64_t> v = integer();
      if (!v) return std::nullopt;
      values.push_back(*v);
      if (!consume(',')) {
        if (!consume(close)) return std::nullopt;
        break;
      }
    }
    return values;
  }

  std::optional<LiteralValue> value() {
    std::string s;
    if (string(&s)) return LiteralValue(std::move(s));
    if (consume_word("True") || consume_word("true")) return LiteralValue(true);
    if (consume_word("False") || consume_word("false")) return LiteralValue(false);
    for (auto [open, close] : {std::pair{'(', ')'}, std::pair{'[', ']'}}) {
      if (consume(open)) {
        std::optional<std::vector<int64_t>> list = int_list(close);
        if (!list) return std::nullopt;
        return LiteralValue(std::move(*list));
      }
    }
    if (std::optional<int64_t> i = integer()) return LiteralValue(*i);
    return std::nullopt;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

template <class T>
std::optional<T> lookup(const LiteralDict& dict, std::string_view key) {
  const auto it = dict.find(key);
  if (it == dict.end() || !std::holds_alternative<T>(it->second)) return std::nullopt;
  return std::get<T>(it->second);
}

}  // namespace

std::optional<LiteralDict> parse_literal_dict(std::string_view text, std::string* error) {
  return Reader(text).dict(error);
}

std::optional<std::string> dict_string(const LiteralDict& dict, std::string_view key) {
  return lookup<std::string>(dict, key);
}

std::optional<bool> dict_bool(const LiteralDict& dict, std::string_view key) {
  return lookup<bool>(dict, key);
}

std::optional<int64_t> dict_int(const LiteralDict& dict, std::string_view key) {
  return lookup<int64_t>(dict, key);
}

std::optional<std::vector<int64_t>> dict_ints(const LiteralDict& dict, std::string_view key) {
  return lookup<std::vector<int64_t>>(dict, key);
}

}  // namespace mxattn::tools
