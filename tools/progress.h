// A one-line progress bar on stderr for long work; silent when stderr is not a terminal.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace mxattn::tools {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total)
      : label_(std::move(label)), total_(total), shown_(isatty(STDERR_FILENO) != 0) {}
  ~ProgressBar() { finish(); }

  void update(int64_t done) {
    if (!shown_ || total_ <= 0) return;
    const int width = 30;
    const int filled = int(double(done) / double(total_) * width);
    std::fprintf(stderr, "\r%s [%s%s] %3d%%", label_.c_str(),
                 std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str(),
                 int(100.0 * double(done) / double(total_)));
    std::fflush(stderr);
    drawn_ = true;
  }

  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", int(label_.size()) + 40, "");
    drawn_ = false;
  }

 private:
  std::string label_;
  int64_t total_;
  bool shown_;
  bool drawn_ = false;
};

}  // namespace mxattn::tools
