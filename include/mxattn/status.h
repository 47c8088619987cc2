// Error values returned through the API. Nothing in the API throws.
#pragma once

#include <string>
#include <utility>

namespace mxattn {

enum class ErrorCode {
  ok,
  invalid_argument,  // an argument fails validation; the message names it
  unsupported,       // valid, but not implemented by the chosen engine
  out_of_memory,
  runtime,  // a failure while running (e.g. a CUDA error)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status invalid(std::string message) {
    return Status(ErrorCode::invalid_argument, std::move(message));
  }
  static Status unsupported(std::string message) {
    return Status(ErrorCode::unsupported, std::move(message));
  }
  static Status runtime(std::string message) {
    return Status(ErrorCode::runtime, std::move(message));
  }

  bool is_ok() const { return code_ == ErrorCode::ok; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same error with `context` (e.g. "sequence 3: ") before its message.
  Status prefixed(const std::string& context) const { return Status(code_, context + message_); }

 private:
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
};

}  // namespace mxattn
