// .npy reading and writing (tools/npy.h), including headers byte for byte as NumPy and ml_dtypes
// write them.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "npy.h"
#include "test_files.h"

namespace mxattn::tools {
namespace {

std::string header_v1(const std::string& dict) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY";
  file += char(1);
  file += char(0);
  file += char(header.size() & 0xff);
  file += char(header.size() >> 8);
  return file + header;
}

TEST(Npy, RoundTripsEveryDtype) {
  const TempDir dir("npy_round_trip");
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::e8m0}) {
    SCOPED_TRACE(std::string(name_of(t)));
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{5}, std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{1, 0, 2},
          std::vector<int64_t>{1, 2, 1, 2, 1, 3}}) {
      base::HostTensor t_in(t, shape);
      auto* bytes = static_cast<unsigned char*>(t_in.view().data);
      for (int64_t i = 0; i < t_in.bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
      const std::string path = dir.file("a.npy");
      ASSERT_TRUE(write_npy(path, t_in.view()));
      const std::string file = read_bytes(path);
      EXPECT_EQ(file.size() % 64, size_t(t_in.bytes()) % 64);  // header padded to 64 bytes
      base::HostTensor t_out;
      const Status s = read_npy(path, &t_out);
      ASSERT_TRUE(s) << s.message();
      EXPECT_EQ(t_out.view().dtype, t);
      EXPECT_EQ(t_out.view().shape_string(), t_in.view().shape_string());
      ASSERT_EQ(t_out.bytes(), t_in.bytes());
      EXPECT_EQ(std::memcmp(t_out.view().data, t_in.view().data, size_t(t_in.bytes())), 0);
    }
  }
}

TEST(Npy, ReadsHeadersAsNumpyWritesThem) {
  const TempDir dir("npy_numpy_headers");
  // Exactly what np.save writes for a bfloat16 (ml_dtypes) array of shape (2, 3), and for f32 (5,).
  const std::string bf16 = header_v1("{'descr': '<V2', 'fortran_order': False, 'shape': (2, 3), }");
  ASSERT_EQ(bf16.size(), 128u);
  write_bytes(dir.file("bf16.npy"), bf16 + std::string(12, '\x3f'));
  base::HostTensor t;
  ASSERT_TRUE(read_npy(dir.file("bf16.npy"), &t));
  EXPECT_EQ(t.view().dtype, DType::bf16);
  EXPECT_EQ(t.view().shape_string(), "[2, 3]");
  EXPECT_EQ(base::bf16_to_float(t.data<uint16_t>()[0]), base::bf16_to_float(0x3f3f));

  // Version 2: a 4-byte header length.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  while ((12 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string v2 = "\x93NUMPY";
  v2 += char(2);
  v2 += char(0);
  v2 += char(header.size());
  v2 += std::string(3, '\0');
  const float values[2] = {1.5f, -2.0f};
  write_bytes(dir.file("v2.npy"),
              v2 + header + std::string(reinterpret_cast<const char*>(values), sizeof values));
  ASSERT_TRUE(read_npy(dir.file("v2.npy"), &t));
  EXPECT_EQ(t.view().shape_string(), "[2]");
  EXPECT_EQ(t.data<float>()[1], -2.0f);
}

TEST(Npy, RejectsWhatItCannotRead) {
  const TempDir dir("npy_rejects");
  const auto message = [&](const std::string& contents) {
    const std::string path = dir.file("bad.npy");
    write_bytes(path, contents);
    base::HostTensor t;
    const Status s = read_npy(path, &t);
    EXPECT_FALSE(s);
    return s.message().substr(path.size() + 2);
  };
  EXPECT_EQ(message(header_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }") +
                    std::string(24, '\0')),
            "fortran_order arrays are not supported; save C order");
  EXPECT_EQ(message(header_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }")),
            "unsupported dtype '>f4' (supported: '<f4', '<f2', bfloat16 '<V2', '<i4', '|u1')");
  EXPECT_EQ(message(header_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }")),
            "unsupported dtype '<f8' (supported: '<f4', '<f2', bfloat16 '<V2', '<i4', '|u1')");
  EXPECT_EQ(message(header_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), }")),
            "shape [] has rank 0; ranks 1 to 6 are supported");
  EXPECT_EQ(message(header_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }") +
                    std::string(8, '\0')),
            "the file ends after 8 of 12 data bytes");
  EXPECT_EQ(message(header_v1("{'descr': '<f4', 'shape': (3,), }")),
            "the header needs 'descr' (a string), 'fortran_order' and 'shape' (a tuple)");
  EXPECT_EQ(message("PK\x03\x04 a zip file"), "not a .npy file (no \\x93NUMPY magic)");
  base::HostTensor t;
  const Status missing = read_npy(dir.file("missing.npy"), &t);
  EXPECT_EQ(missing.message(), dir.file("missing.npy") + ": cannot open for reading");

  std::vector<float> data(6);
  TensorView strided = make_view(data.data(), DType::f32, {3, 2});
  strided = permuted(strided, {1, 0});
  EXPECT_EQ(write_npy(dir.file("t.npy"), strided).message(),
            dir.file("t.npy") + ": only contiguous views can be written");
}

// A ZIP member as writers without zip64 store it: sizes in the local header, method 0 (stored)
// unless given.
std::string zip_member(const std::string& name, const std::string& data, int method = 0) {
  const auto put = [](std::string& out, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out += char((value >> (8 * i)) & 0xff);
  };
  std::string out;
  put(out, 0x04034b50, 4);  // local file header
  put(out, 20, 2);          // version needed
  put(out, 0, 2);           // flags
  put(out, uint64_t(method), 2);
  put(out, 0, 4);  // time, date
  put(out, 0, 4);  // crc (not checked)
  put(out, data.size(), 4);
  put(out, data.size(), 4);
  put(out, name.size(), 2);
  put(out, 0, 2);
  return out + name + data;
}

// .npz archives: members by name in order, int64 index arrays narrowed to int32, the errors.
TEST(Npz, ReadsStoredMembersAndSaysWhyItRefusesOthers) {
  const TempDir dir("npz");
  base::HostTensor a(DType::i32, {2, 3});
  for (int i = 0; i < 6; ++i) a.data<int32_t>()[i] = i * 7 - 3;
  ASSERT_TRUE(write_npy(dir.file("a.npy"), a.view()));
  const std::string a_npy = read_bytes(dir.file("a.npy"));
  // An int64 index array, as NumPy writes np.array([...]) by default.
  std::string wide = header_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }");
  for (int64_t v : {int64_t(5), int64_t(-2), int64_t(INT32_MAX)}) {
    for (int i = 0; i < 8; ++i) wide += char((uint64_t(v) >> (8 * i)) & 0xff);
  }
  const std::string end_of_directory = std::string("PK\x05\x06", 4) + std::string(18, '\0');
  write_bytes(dir.file("ok.npz"), zip_member("row_ptr.npy", a_npy) +
                                      zip_member("notes.txt", "ignored") +
                                      zip_member("col_idx.npy", wide) + end_of_directory);
  std::vector<std::pair<std::string, base::HostTensor>> arrays;
  const Status st = read_npz(dir.file("ok.npz"), NpyRead::index, &arrays);
  ASSERT_TRUE(st) << st.message();
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(arrays[0].first, "row_ptr");
  EXPECT_EQ(arrays[0].second.view().shape_string(), "[2, 3]");
  EXPECT_EQ(std::memcmp(arrays[0].second.view().data, a.view().data, 24), 0);
  EXPECT_EQ(arrays[1].first, "col_idx");
  ASSERT_EQ(arrays[1].second.view().dtype, DType::i32);
  EXPECT_EQ(arrays[1].second.data<int32_t>()[0], 5);
  EXPECT_EQ(arrays[1].second.data<int32_t>()[1], -2);
  EXPECT_EQ(arrays[1].second.data<int32_t>()[2], INT32_MAX);

  // '<i8' only as an index array.
  EXPECT_FALSE(read_npz(dir.file("ok.npz"), NpyRead::any, &arrays));

  const auto refused = [&](const std::string& bytes, const std::string& why) {
    write_bytes(dir.file("bad.npz"), bytes);
    const Status bad = read_npz(dir.file("bad.npz"), NpyRead::index, &arrays);
    EXPECT_FALSE(bad);
    EXPECT_NE(bad.message().find(why), std::string::npos) << bad.message();
  };
  refused(zip_member("row_ptr.npy", a_npy, 8) + end_of_directory, "np.savez_compressed");
  refused(a_npy, "not a .npz archive");
  refused(zip_member("row_ptr.npy", a_npy), "ends without a directory");
  refused(zip_member("row_ptr.npy", a_npy).substr(0, 50), "bad sizes");
  std::string too_wide = header_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }");
  for (int i = 0; i < 8; ++i) too_wide += char(i == 4 ? 1 : 0);  // 2^32
  refused(zip_member("x.npy", too_wide) + end_of_directory, "does not fit in int32");
  EXPECT_FALSE(read_npz(dir.file("missing.npz"), NpyRead::index, &arrays));
}

}  // namespace
}  // namespace mxattn::tools
