// .npy reading and writing (tools/npy.h), including headers byte for byte as NumPy and ml_dtypes
// write them.
#include <gtest/gtest.h>

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
      core::HostTensor t_in(t, shape);
      auto* bytes = static_cast<unsigned char*>(t_in.view().data);
      for (int64_t i = 0; i < t_in.bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
      const std::string path = dir.file("a.npy");
      ASSERT_TRUE(write_npy(path, t_in.view()));
      const std::string file = read_bytes(path);
      EXPECT_EQ(file.size() % 64, size_t(t_in.bytes()) % 64);  // header padded to 64 bytes
      core::HostTensor t_out;
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
  core::HostTensor t;
  ASSERT_TRUE(read_npy(dir.file("bf16.npy"), &t));
  EXPECT_EQ(t.view().dtype, DType::bf16);
  EXPECT_EQ(t.view().shape_string(), "[2, 3]");
  EXPECT_EQ(core::bf16_to_float(t.data<uint16_t>()[0]), core::bf16_to_float(0x3f3f));

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
    core::HostTensor t;
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
  core::HostTensor t;
  const Status missing = read_npy(dir.file("missing.npy"), &t);
  EXPECT_EQ(missing.message(), dir.file("missing.npy") + ": cannot open for reading");

  std::vector<float> data(6);
  TensorView strided = make_view(data.data(), DType::f32, {3, 2});
  strided = permuted(strided, {1, 0});
  EXPECT_EQ(write_npy(dir.file("t.npy"), strided).message(),
            dir.file("t.npy") + ": only contiguous views can be written");
}

}  // namespace
}  // namespace mxattn::tools
