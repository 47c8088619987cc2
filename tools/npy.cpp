#include "npy.h"

#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
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

namespace {

// One .npy image read from `in`; `path` names it in errors.
Status read_npy_from(std::istream& in, const std::string& path, NpyRead how,
                     base::HostTensor* out) {
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
  const bool wide_index = how == NpyRead::index && *descr == "<i8";
  const std::optional<DType> dtype = wide_index ? DType::i32 : dtype_of_descr(*descr);
  if (!dtype || (how == NpyRead::index && *dtype != DType::i32)) {
    return fail(path, "unsupported dtype '" + *descr +
                          (how == NpyRead::index
                               ? "' (index arrays: '<i4' or '<i8')"
                               : "' (supported: '<f4', '<f2', bfloat16 '<V2', '<i4', '|u1')"));
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
  if (!contiguous_bytes(*dtype, numel) || (wide_index && !contiguous_bytes(DType::f32, 2 * numel)))
    return fail(path, "shape " + shape_text(*shape) + " is too large");
  base::HostTensor tensor(*dtype, *shape);
  if (wide_index) {
    std::vector<int64_t> wide(static_cast<size_t>(numel));
    const std::streamsize bytes = std::streamsize(numel) * 8;
    if (!in.read(reinterpret_cast<char*>(wide.data()), bytes)) {
      return fail(path, "the data ends after " + std::to_string(in.gcount()) + " of " +
                            std::to_string(bytes) + " bytes");
    }
    int32_t* narrow = tensor.data<int32_t>();
    for (int64_t i = 0; i < numel; ++i) {
      if (wide[size_t(i)] < INT32_MIN || wide[size_t(i)] > INT32_MAX) {
        return fail(path, "element " + std::to_string(i) + " (" + std::to_string(wide[size_t(i)]) +
                              ") does not fit in int32");
      }
      narrow[i] = int32_t(wide[size_t(i)]);
    }
  } else if (!in.read(static_cast<char*>(tensor.view().data), std::streamsize(tensor.bytes()))) {
    return fail(path, "the file ends after " + std::to_string(in.gcount()) + " of " +
                          std::to_string(tensor.bytes()) + " data bytes");
  }
  *out = std::move(tensor);
  return Status::ok();
}

uint64_t little_endian64(const unsigned char* bytes) {
  return uint64_t(little_endian(bytes, 4)) | uint64_t(little_endian(bytes + 4, 4)) << 32;
}

}  // namespace

Status read_npy(const std::string& path, base::HostTensor* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open for reading");
  return read_npy_from(in, path, NpyRead::any, out);
}

Status read_npz(const std::string& path, NpyRead how,
                std::vector<std::pair<std::string, base::HostTensor>>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open for reading");
  const std::string zip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* bytes = reinterpret_cast<const unsigned char*>(zip.data());
  constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50;
  constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64EndOfDirectory = 0x06064b50;
  constexpr size_t kLocalHeaderSize = 30;
  std::vector<std::pair<std::string, base::HostTensor>> arrays;
  size_t at = 0;
  while (true) {
    if (at + 4 > zip.size()) return fail(path, "not a .npz archive (it ends without a directory)");
    const uint32_t signature = little_endian(bytes + at, 4);
    if (signature == kCentralHeader || signature == kEndOfDirectory ||
        signature == kZip64EndOfDirectory) {
      break;
    }
    if (signature != kLocalHeader || at + kLocalHeaderSize > zip.size()) {
      return fail(path, "not a .npz archive (no ZIP member at byte " + std::to_string(at) + ")");
    }
    const uint32_t flags = little_endian(bytes + at + 6, 2);
    const uint32_t method = little_endian(bytes + at + 8, 2);
    uint64_t stored = little_endian(bytes + at + 18, 4);
    uint64_t size = little_endian(bytes + at + 22, 4);
    const size_t name_size = little_endian(bytes + at + 26, 2);
    const size_t extra_size = little_endian(bytes + at + 28, 2);
    const size_t name_at = at + kLocalHeaderSize, extra_at = name_at + name_size;
    const size_t data_at = extra_at + extra_size;
    if (data_at > zip.size()) return fail(path, "truncated ZIP member header");
    const std::string name = zip.substr(name_at, name_size);
    // Zip64 (np.savez writes its members so): the sizes that read 0xFFFFFFFF are in the extra
    // field 0x0001, uncompressed first.
    for (size_t e = extra_at; e + 4 <= data_at;) {
      const uint32_t id = little_endian(bytes + e, 2), length = little_endian(bytes + e + 2, 2);
      if (e + 4 + length > data_at) return fail(path, "member " + name + ": bad extra field");
      if (id == 0x0001) {
        size_t field = e + 4;
        if (size == 0xffffffffu && field + 8 <= e + 4 + length) {
          size = little_endian64(bytes + field);
          field += 8;
        }
        if (stored == 0xffffffffu && field + 8 <= e + 4 + length)
          stored = little_endian64(bytes + field);
      }
      e += 4 + length;
    }
    if (method != 0) {
      return fail(path,
                  "member " + name +
                      " is compressed; write the layout with np.savez, not np.savez_compressed");
    }
    if ((flags & 0x8u) != 0 && stored == 0) {
      return fail(path, "member " + name + " was written to a stream (sizes after the data)");
    }
    if (stored != size || stored > zip.size() - data_at) {
      return fail(path, "member " + name + ": bad sizes");
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) {
      std::istringstream member(zip.substr(data_at, size_t(stored)));
      base::HostTensor tensor;
      if (Status st = read_npy_from(member, path + ": " + name, how, &tensor); !st) return st;
      arrays.emplace_back(name.substr(0, name.size() - 4), std::move(tensor));
    }
    at = data_at + size_t(stored);
  }
  *out = std::move(arrays);
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
