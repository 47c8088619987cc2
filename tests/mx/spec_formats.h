// The MX formats as spec §5 and the OCP MX v1.0 table define them, written out independently of
// src/mx/formats.h so the tests check the codecs against the definition, not against themselves.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "mxattn/dtype.h"

namespace mxattn::spec {

struct ElementFormat {
  DType type;
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  double max_value;
  int emax;              // exponent of the largest normal
  bool ieee_inf_nan;     // exponent all ones: Inf (mantissa 0) or NaN
  bool nan_is_all_ones;  // S.1111.111 is NaN (E4M3)
};

inline constexpr ElementFormat kFormats[] = {
    {DType::e4m3, "e4m3", 4, 3, 7, 448.0, 8, false, true},
    {DType::e5m2, "e5m2", 5, 2, 15, 57344.0, 15, true, false},
    {DType::e2m3, "e2m3", 2, 3, 1, 7.5, 2, false, false},
    {DType::e3m2, "e3m2", 3, 2, 3, 28.0, 4, false, false},
    {DType::e2m1, "e2m1", 2, 1, 1, 6.0, 2, false, false},
};

inline int code_bits(const ElementFormat& f) {
  return 1 + f.exponent_bits + f.mantissa_bits;
}
inline int code_count(const ElementFormat& f) {
  return 1 << code_bits(f);
}

// The value of a code from its sign, exponent and mantissa fields.
inline double value_of(const ElementFormat& f, unsigned code) {
  const unsigned sign = (code >> (f.exponent_bits + f.mantissa_bits)) & 1u;
  const unsigned exponent = (code >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1u);
  const unsigned mantissa = code & ((1u << f.mantissa_bits) - 1u);
  const unsigned all_ones_exponent = (1u << f.exponent_bits) - 1u;
  double magnitude;
  if (f.ieee_inf_nan && exponent == all_ones_exponent) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (f.nan_is_all_ones && exponent == all_ones_exponent &&
             mantissa == (1u << f.mantissa_bits) - 1u) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(double(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    magnitude =
        std::ldexp(1.0 + std::ldexp(double(mantissa), -f.mantissa_bits), int(exponent) - f.bias);
  }
  return sign ? -magnitude : magnitude;
}

// E8M0: 2^(e - 127), 0xFF is NaN.
inline double scale_value(unsigned byte) {
  return byte == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(byte) - 127);
}

// Distance between neighbouring values around |y| (y in the format's finite range).
inline double quantum_at(const ElementFormat& f, double y) {
  const int min_normal_exponent = 1 - f.bias;
  int exponent = min_normal_exponent;
  if (y != 0) exponent = std::max(min_normal_exponent, std::ilogb(y));
  return std::ldexp(1.0, exponent - f.mantissa_bits);
}

}  // namespace mxattn::spec
