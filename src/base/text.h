// Building messages: cat(parts...) streams any printable values into one string.
#pragma once

#include <sstream>
#include <string>

namespace mxattn::base {

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

}  // namespace mxattn::base
