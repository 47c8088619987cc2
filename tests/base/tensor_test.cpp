// Tensor views: the bytes a view needs (spec §7: 64-bit sizes, packed types) and dtype names.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "mxattn/dtype.h"
#include "mxattn/tensor.h"

namespace mxattn {
namespace {

// A view over no memory: bytes_needed follows from shape and strides alone.
TensorView view_of(DType dtype, std::initializer_list<int64_t> shape,
                   std::initializer_list<int64_t> strides = {}) {
  TensorView v = make_view(nullptr, dtype, shape, 0);
  int i = 0;
  for (int64_t s : strides) v.stride[i++] = s;
  return v;
}

TEST(BytesNeeded, ContiguousIsElementsTimesSize) {
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {2, 3, 4})), 96);
  EXPECT_EQ(bytes_needed(view_of(DType::bf16, {2, 3, 4})), 48);
  EXPECT_EQ(bytes_needed(view_of(DType::e4m3, {5, 7})), 35);
  EXPECT_EQ(bytes_needed(view_of(DType::i32, {1})), 4);
}

TEST(BytesNeeded, StridedEndsAtTheFarthestElement) {
  // Farthest element at offset 1 * 8 + 2 * 2 = 12, so 13 elements are spanned.
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {2, 3}, {8, 2})), 13 * 4);
  // A broadcast axis (stride 0) adds nothing.
  EXPECT_EQ(bytes_needed(view_of(DType::f16, {1000, 3}, {0, 1})), 3 * 2);
  EXPECT_EQ(make_view(nullptr, DType::f32, {4, 4}, 1000).bytes, 1000);
}

TEST(BytesNeeded, PermutedViewSpansTheSameMemory) {
  const TensorView v = view_of(DType::f32, {2, 3, 4});
  const TensorView p = permuted(v, {2, 0, 1});
  EXPECT_EQ(p.shape_string(), "[4, 2, 3]");
  EXPECT_EQ(p.stride[0], 1);
  EXPECT_EQ(p.stride[1], 12);
  EXPECT_EQ(p.stride[2], 4);
  EXPECT_EQ(bytes_needed(p), 96);
  // A permuted slice of the first two rows of axis 0 of a [4, 3] tensor: still ends at offset 5.
  EXPECT_EQ(bytes_needed(permuted(view_of(DType::f32, {2, 3}, {3, 1}), {1, 0})), 24);
}

TEST(BytesNeeded, PackedTypesCountBits) {
  // FP6: 3 rows of 32 elements = 576 bits.
  EXPECT_EQ(bytes_needed(view_of(DType::e2m3, {3, 32})), 72);
  EXPECT_EQ(bytes_needed(view_of(DType::e3m2, {4})), 3);
  // Rows 36 elements apart: the last element is 2 * 36 + 31 = 103, so 104 * 6 bits = 78 bytes.
  EXPECT_EQ(bytes_needed(view_of(DType::e2m3, {3, 32}, {36, 1})), 78);
  // FP4: two a byte; an odd count ends in the low nibble of its last byte.
  EXPECT_EQ(bytes_needed(view_of(DType::e2m1, {8, 32})), 128);
  EXPECT_EQ(bytes_needed(view_of(DType::e2m1, {5})), 3);
  // A partial FP6 group still needs the byte holding its last bit.
  EXPECT_EQ(bytes_needed(view_of(DType::e2m3, {5})), 4);
}

TEST(BytesNeeded, ZeroSizeNeedsNothing) {
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {2, 0, 3})), 0);
  EXPECT_EQ(bytes_needed(view_of(DType::e2m1, {0})), 0);
  EXPECT_EQ(bytes_needed(TensorView{}), 0);
  EXPECT_EQ(TensorView{}.numel(), 0);
  EXPECT_EQ(view_of(DType::f32, {2, 0, 3}).numel(), 0);
}

TEST(BytesNeeded, NegativeStrideOrDimensionIsRejected) {
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {2, 3}, {-3, 1})), std::nullopt);
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {2, 3}, {3, -1})), std::nullopt);
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {2, -3}, {3, 1})), std::nullopt);
}

TEST(BytesNeeded, SizesPast32BitsAreExact) {
  const int64_t two31 = int64_t(1) << 31;
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {two31 + 1})), 4 * (two31 + 1));
  EXPECT_EQ(bytes_needed(view_of(DType::f16, {1 << 20, 1 << 12})), int64_t(1) << 33);
  EXPECT_EQ(bytes_needed(view_of(DType::e2m1, {3, two31})), 3 * (two31 / 2));
  EXPECT_EQ(bytes_needed(view_of(DType::e2m3, {4, two31})), 4 * two31 * 6 / 8);
  EXPECT_EQ(view_of(DType::f32, {two31, 4}).numel(), 4 * two31);
  EXPECT_EQ(contiguous_bytes(DType::bf16, int64_t(3) << 40), int64_t(3) << 41);
}

TEST(BytesNeeded, OverflowIsNullopt) {
  const int64_t two31 = int64_t(1) << 31;
  EXPECT_EQ(bytes_needed(view_of(DType::f32, {two31, two31})), std::nullopt);  // 2^64 bytes
  EXPECT_EQ(bytes_needed(view_of(DType::e8m0, {3}, {int64_t(1) << 62})), std::nullopt);
  EXPECT_EQ(bytes_needed(view_of(DType::i32, {2, 2}, {INT64_MAX, 1})), std::nullopt);
  EXPECT_EQ(contiguous_bytes(DType::f32, INT64_MAX / 2), std::nullopt);
  EXPECT_EQ(contiguous_bytes(DType::f32, -1), std::nullopt);
}

TEST(TensorView, ShapeString) {
  EXPECT_EQ(view_of(DType::e8m0, {1, 1024, 8, 4}).shape_string(), "[1, 1024, 8, 4]");
  EXPECT_EQ(TensorView{}.shape_string(), "[]");
  EXPECT_FALSE(TensorView{}.given());
}

TEST(DTypeNames, RoundTripAndAliases) {
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(name_of(t));
    EXPECT_EQ(parse_dtype(name_of(t)), t);
  }
  EXPECT_EQ(parse_dtype("BF16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("mxfp8"), DType::e4m3);
  EXPECT_EQ(parse_dtype("mxfp6_e3m2"), DType::e3m2);
  EXPECT_EQ(parse_dtype("mxfp4"), DType::e2m1);
  EXPECT_EQ(parse_dtype("f64"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
}

TEST(DTypeNames, PackingFollowsTheBitWidth) {
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(name_of(t));
    EXPECT_EQ(pack_group(t) * bits_of(t) % 8, 0);
    EXPECT_EQ(is_mx(t), t == DType::e4m3 || t == DType::e5m2 || t == DType::e2m3 ||
                            t == DType::e3m2 || t == DType::e2m1);
  }
  EXPECT_EQ(pack_group(DType::e2m3), 4);
  EXPECT_EQ(pack_group(DType::e2m1), 2);
  EXPECT_EQ(pack_group(DType::e4m3), 1);
}

}  // namespace
}  // namespace mxattn
