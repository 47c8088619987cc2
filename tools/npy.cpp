#include "npy.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

#include "cli.h"
#include "literal.h"

namespace mxattn::tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// Total header size (magic, version, length and dict) is a multiple of this, as NumPy writes it.
constexpr size_t kHeaderAlignment = 64;

struct Descr {
  std::string_view text;
  DType dtype;
};

// What we write first; the others are accepted spellings of the same layouts.
constexpr Descr kDescrs[] = {
    {"<f4", DType::f32}, {"<f2", DType::f16},  {"<V2", DType::bf16},
    {"<i4", DType::i32}, {"|u1", DType::e8m0}, {"|V2", DType::bf16},
};

std::optional<DType> dtype_of_descr(std::string_view descr) {
  for (const Descr& d : kDescrs) {
    if (d.text == descr) return d.dtype;
  }
  return std::nullopt;
}

std::optional<std::string_view> descr_of_dtype(DType t) {
  for (const Descr& d : kDescrs) {
    if (d.dtype == t) return d.text;
  }
  return std::nullopt;
}

Status fail(const std::string& path, const std::string& what) {
  return Status::invalid(path + ": " + what);
}

uint32_t little_endian(const unsigned char* bytes, int count) {
  uint32_t value = 0;
  for (int i = 0; i < count; ++i) value |= uint32_t(bytes[i]) << (8 * i);
  return value;
}

}  // namespace

std::string npy_type_name(DType t) {
  return t == DType::e8m0 ? "u8" : std::string(name_of(t));
}

Status read_npy(const std::string& path, core::HostTensor* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open for reading");
  unsigned char preamble[kMagicSize + 2];
  if (!in.read(reinterpret_cast<char*>(preamble), sizeof preamble) ||
      std::memcmp(preamble, kMagic, kMagicSize) != 0) {
    return fail(path, "not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = preamble[kMagicSize];
  if (major < 1 || major > 3) {
    return fail(path, "unsupported .npy format version " + std::to_string(major));
  }
  const int length_bytes = major == 1 ? 2 : 4;
  unsigned char length_field[4];
  if (!in.read(reinterpret_cast<char*>(length_field), length_bytes)) {
    return fail(path, "truncated header");
  }
  std::string header(little_endian(length_field, length_bytes), '\0');
  if (!in.read(header.data(), std::streamsize(header.size()))) {
    return fail(path, "truncated header");
  }
  std::string error;
  const std::optional<LiteralDict> dict = parse_literal_dict(header, &error);
  if (!dict) return fail(path, "cannot parse the header (" + error + ")");
  const std::optional<std::string> descr = dict_string(*dict, "descr");
  const std::optional<bool> fortran_order = dict_bool(*dict, "fortran_order");
  const std::optional<std::vector<int64_t>> shape = dict_ints(*dict, "shape");
  if (!descr || !fortran_order || !shape) {
    return fail(path, "the header needs 'descr' (a string), 'fortran_order' and 'shape' (a tuple)");
  }
  const std::optional<DType> dtype = dtype_of_descr(*descr);
  if (!dtype) {
    return fail(path, "unsupported dtype '" + *descr +
                          "' (supported: '<f4', '<f2', bfloat16 '<V2', '<i4', '|u1')");
  }
  if (*fortran_order) return fail(path, "fortran_order arrays are not supported; save C order");
  if (shape->empty() || shape->size() > size_t(kMaxRank)) {
    return fail(path, "shape " + shape_text(*shape) + " has rank " + std::to_string(shape->size()) +
                          "; ranks 1 to " + std::to_string(kMaxRank) + " are supported");
  }
  int64_t numel = 1;
  for (int64_t d : *shape) {
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) {
      return fail(path, "invalid shape " + shape_text(*shape));
    }
  }
  if (!contiguous_bytes(*dtype, numel))
    return fail(path, "shape " + shape_text(*shape) + " is too large");
  core::HostTensor tensor(*dtype, *shape);
  if (!in.read(static_cast<char*>(tensor.view().data), std::streamsize(tensor.bytes()))) {
    return fail(path, "the file ends after " + std::to_string(in.gcount()) + " of " +
                          std::to_string(tensor.bytes()) + " data bytes");
  }
  *out = std::move(tensor);
  return Status::ok();
}

Status write_npy(const std::string& path, const TensorView& v) {
  const std::optional<std::string_view> descr = descr_of_dtype(v.dtype);
  if (!descr) {
    return fail(path, "cannot write dtype " + std::string(name_of(v.dtype)) + " to .npy");
  }
  TensorView contiguous = v;
  set_contiguous_strides(contiguous);
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] > 1 && v.stride[i] != contiguous.stride[i]) {
      return fail(path, "only contiguous views can be written");
    }
  }
  const std::optional<int64_t> bytes = bytes_needed(contiguous);
  if (!bytes || *bytes > v.bytes) return fail(path, "the view is not backed by enough bytes");
  std::string shape = "(";
  shape += join_ints({v.shape, v.shape + v.rank}, ", ");
  shape += v.rank == 1 ? ",)" : ")";  // Python's 1-tuple is "(5,)"
  std::string header =
      "{'descr': '" + std::string(*descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const bool version1 = header.size() + kMagicSize + 4 + 1 <= 65535;
  const size_t prefix = kMagicSize + 2 + (version1 ? 2 : 4);
  const size_t padded =
      (prefix + header.size() + 1 + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment;
  header.append(padded - prefix - header.size() - 1, ' ');
  header += '\n';

  std::ofstream out(path, std::ios::binary);
  if (!out) return fail(path, "cannot open for writing");
  out.write(kMagic, kMagicSize);
  const char version[2] = {char(version1 ? 1 : 2), 0};
  out.write(version, 2);
  const uint32_t length = uint32_t(header.size());
  const char length_field[4] = {char(length & 0xff), char((length >> 8) & 0xff),
                                char((length >> 16) & 0xff), char((length >> 24) & 0xff)};
  out.write(length_field, version1 ? 2 : 4);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(static_cast<const char*>(v.data), std::streamsize(*bytes));
  if (!out) return fail(path, "write failed");
  return Status::ok();
}

}  // namespace mxattn::tools
