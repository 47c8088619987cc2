// `mxattn formats`: range and precision of each MX format, computed from the codecs of
// mx/formats.h.
#include <cmath>
#include <cstdio>
#include <string>

#include "cli.h"
#include "mx/formats.h"
#include "verbs.h"

namespace mxattn::tools {
namespace {

const char* mx_name(DType t) {
  switch (bits_of(t)) {
    case 6:
      return "MXFP6";
    case 4:
      return "MXFP4";
    default:
      return "MXFP8";
  }
}

const char* non_finite_rule(DType t) {
  const mx::FormatInfo f = mx::format_info(t);
  if (f.ieee_special) return "Inf and NaN codes";
  if (f.nan_code) return "NaN code (Inf -> NaN)";
  return "none: NaN block scale";
}

// A value as "448 (2^8.81)" so both the number and its binade show.
std::string with_binade(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g (2^%.4g)", v, std::log2(v));
  return text;
}

}  // namespace

int verb_formats(int argc, char** argv) {
  FlagParser flags(
      "formats", "",
      "Prints, for each MX element type and the E8M0 scale, the range (largest value,\n"
      "smallest normal and subnormal), the precision (mantissa bits, relative step)\n"
      "and the storage per element including one E8M0 scale per 32 elements.");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;

  std::printf("%-6s %-6s %4s  %-20s %-20s %-20s %8s %9s %13s  %s\n", "format", "family", "bits",
              "max", "min normal", "min subnormal", "mantissa", "rel. step", "bytes/element",
              "non-finite");
  for (DType t : {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1}) {
    const mx::FormatInfo f = mx::format_info(t);
    const double largest = mx::decode(t, mx::max_code(t));
    const double min_normal = mx::decode(t, uint8_t(1u << f.mbits));
    const double min_subnormal = mx::decode(t, 1);
    const uint8_t one = mx::encode(t, 1.0f);
    const double step = double(mx::decode(t, uint8_t(one + 1))) - double(mx::decode(t, one));
    const double bytes = (double(kMxBlock) * bits_of(t) / 8 + 1) / kMxBlock;
    std::printf("%-6s %-6s %4d  %-20s %-20s %-20s %8d %9.6g %13.6g  %s\n",
                std::string(name_of(t)).c_str(), mx_name(t), bits_of(t),
                with_binade(largest).c_str(), with_binade(min_normal).c_str(),
                with_binade(min_subnormal).c_str(), f.mbits, step, bytes, non_finite_rule(t));
  }
  const double scale_max = mx::decode_scale(0xfe);
  const double scale_min = mx::decode_scale(0);
  const double scale_step = double(mx::decode_scale(128)) / double(mx::decode_scale(127));
  char step[16];
  std::snprintf(step, sizeof step, "x%g", scale_step);
  std::printf("%-6s %-6s %4d  %-20s %-20s %-20s %8d %9s %13s  %s\n", "e8m0", "scale", 8,
              with_binade(scale_max).c_str(), with_binade(scale_min).c_str(), "-", 0, step,
              ("1 per " + std::to_string(kMxBlock)).c_str(), "0xFF is NaN");
  return kExitOk;
}

}  // namespace mxattn::tools
