// Writes what src/mx/formats.h computes, for check_ml_dtypes.py to compare with ml_dtypes:
//   mx_codec_dump decode TYPE OUT       every code's value as little-endian f32 (E8M0: all 256
//   bytes) mx_codec_dump encode TYPE IN OUT    the code of each little-endian f32 of IN, one byte
//   each
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "mx/formats.h"

namespace {

int fail(const std::string& message) {
  std::cerr << "mx_codec_dump: " << message << "\n";
  return 2;
}

bool write_file(const std::string& path, const void* bytes, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(bytes), std::streamsize(size));
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mxattn;
  if (argc < 4) return fail("usage: mx_codec_dump decode TYPE OUT | encode TYPE IN OUT");
  const std::string verb = argv[1];
  const std::optional<DType> type = parse_dtype(argv[2]);
  if (!type || !(is_mx(*type) || *type == DType::e8m0)) {
    return fail(std::string("not an MX element or scale type: ") + argv[2]);
  }
  if (verb == "decode") {
    std::vector<float> values;
    if (*type == DType::e8m0) {
      for (int e = 0; e < 256; ++e) values.push_back(mx::decode_scale(uint8_t(e)));
    } else {
      for (int c = 0; c < (1 << bits_of(*type)); ++c)
        values.push_back(mx::decode(*type, uint8_t(c)));
    }
    if (!write_file(argv[3], values.data(), values.size() * sizeof(float))) {
      return fail(std::string("cannot write ") + argv[3]);
    }
    return 0;
  }
  if (verb == "encode" && argc == 5 && *type != DType::e8m0) {
    std::ifstream in(argv[3], std::ios::binary);
    if (!in) return fail(std::string("cannot read ") + argv[3]);
    const std::vector<char> raw((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
    if (raw.size() % sizeof(float) != 0) return fail("input is not a whole number of f32 values");
    std::vector<uint8_t> codes(raw.size() / sizeof(float));
    for (size_t i = 0; i < codes.size(); ++i) {
      float x;
      std::memcpy(&x, raw.data() + i * sizeof(float), sizeof(float));
      codes[i] = mx::encode(*type, x);
    }
    if (!write_file(argv[4], codes.data(), codes.size())) {
      return fail(std::string("cannot write ") + argv[4]);
    }
    return 0;
  }
  return fail("usage: mx_codec_dump decode TYPE OUT | encode TYPE IN OUT");
}
