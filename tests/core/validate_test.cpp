// Argument validation (spec §7): one test per class of bad input, each checking the message, and a
// valid problem of each form accepted with the right Problem fields.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "core/problem.h"
#include "core/validate.h"
#include "mxattn/attention.h"
#include "mxattn/combine.h"

namespace mxattn::core {
namespace {

using base::HostTensor;

constexpr int64_t kB = 2, kSq = 16, kHq = 4, kHkv = 2, kDqk = 64, kDv = 32, kSk = 40;

// Owns the buffers behind the views of one test's arguments.
class Buffers {
 public:
  TensorView tensor(DType dtype, const std::vector<int64_t>& shape) {
    tensors_.emplace_back(dtype, shape);
    return tensors_.back().view();
  }
  TensorView int32(const std::vector<int64_t>& shape, const std::vector<int32_t>& values) {
    TensorView v = tensor(DType::i32, shape);
    EXPECT_EQ(int64_t(values.size()), v.numel());
    std::memcpy(v.data, values.data(), values.size() * sizeof(int32_t));
    return v;
  }

 private:
  std::vector<HostTensor> tensors_;
};

// A valid dense problem: B 2, Sq 16, Hq 4, Hkv 2, Dqk 64, Dv 32, Sk 40, f16 inputs, f32 output.
AttentionArgs dense_args(Buffers& buf) {
  AttentionArgs a;
  a.q = buf.tensor(DType::f16, {kB, kSq, kHq, kDqk});
  a.k = buf.tensor(DType::f16, {kB, kSk, kHkv, kDqk});
  a.v = buf.tensor(DType::f16, {kB, kSk, kHkv, kDv});
  a.o = buf.tensor(DType::f32, {kB, kSq, kHq, kDv});
  return a;
}

// MXFP8 Q, MXFP6 K and MXFP4 V, with V's scales along the head dim or the keys.
AttentionArgs mx_args(Buffers& buf, VScaleAxis v_axis) {
  AttentionArgs a = dense_args(buf);
  a.q = buf.tensor(DType::e4m3, {kB, kSq, kHq, kDqk});
  a.k = buf.tensor(DType::e2m3, {kB, kSk, kHkv, kDqk});
  a.v = buf.tensor(DType::e2m1, {kB, kSk, kHkv, kDv});
  a.q_scales = buf.tensor(DType::e8m0, {kB, kSq, kHq, kDqk / 32});
  a.k_scales = buf.tensor(DType::e8m0, {kB, kSk, kHkv, kDqk / 32});
  a.v_scale_axis = v_axis;
  a.v_scales = v_axis == VScaleAxis::head_dim ? buf.tensor(DType::e8m0, {kB, kSk, kHkv, kDv / 32})
                                              : buf.tensor(DType::e8m0, {kB, kHkv, 2, kDv});
  return a;
}

// A valid paged problem: 7 pages of 16 keys, 3 pages per sequence (Sk 48), kv_len {48, 20}.
constexpr int64_t kPages = 7, kPageSize = 16, kMaxPages = 3;
AttentionArgs paged_args(Buffers& buf) {
  AttentionArgs a = dense_args(buf);
  a.k = buf.tensor(DType::f16, {kPages, kPageSize, kHkv, kDqk});
  a.v = buf.tensor(DType::bf16, {kPages, kPageSize, kHkv, kDv});
  a.paged.page_size = kPageSize;
  a.paged.block_table = buf.int32({kB, kMaxPages}, {0, 3, 5, 6, 1, 2});
  a.kv_len = buf.int32({kB}, {48, 20});
  return a;
}

// A valid sparse problem: Sq = Sk = 40 in blocks of 16 (3 query blocks, 3 key blocks), one layout
// per head broadcast over the batch.
constexpr int64_t kSparseSeq = 40;
AttentionArgs sparse_args(Buffers& buf) {
  AttentionArgs a;
  a.q = buf.tensor(DType::f32, {kB, kSparseSeq, kHq, kDqk});
  a.k = buf.tensor(DType::f32, {kB, kSparseSeq, kHkv, kDqk});
  a.v = buf.tensor(DType::f32, {kB, kSparseSeq, kHkv, kDv});
  a.o = buf.tensor(DType::bf16, {kB, kSparseSeq, kHq, kDv});
  a.sparse.block_q = 16;
  a.sparse.block_k = 16;
  a.sparse.row_ptr = buf.int32({1, kHq, 4}, {0, 1, 3, 6,  //
                                             0, 0, 0, 0,  //
                                             0, 3, 3, 5,  //
                                             0, 1, 2, 3});
  a.sparse.col_idx = buf.int32({1, kHq, 6}, {0, 0, 1, 0, 1, 2,  //
                                             0, 0, 0, 0, 0, 0,  //
                                             0, 1, 2, 1, 2, 0,  //
                                             2, 1, 0, 0, 0, 0});
  return a;
}

// Passes when validation fails with exactly `want`, as an invalid argument, leaving `out` alone.
testing::AssertionResult rejected_with(const AttentionArgs& args, const std::string& want) {
  Problem p;
  p.batch = -77;
  const Status st = validate_problem(args, &p);
  if (st) return testing::AssertionFailure() << "accepted; expected: " << want;
  if (st.code() != ErrorCode::invalid_argument) {
    return testing::AssertionFailure() << "error code " << int(st.code()) << ": " << st.message();
  }
  if (p.batch != -77) return testing::AssertionFailure() << "the problem was written on error";
  if (st.message() != want) {
    return testing::AssertionFailure() << "message:  " << st.message() << "\nexpected: " << want;
  }
  return testing::AssertionSuccess();
}

Problem accepted(const AttentionArgs& args) {
  Problem p;
  const Status st = validate_problem(args, &p);
  EXPECT_TRUE(st) << st.message();
  return p;
}

TensorView short_by_one_byte(TensorView v) {
  v.bytes -= 1;
  return v;
}

TEST(Validate, WrongRank) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.q = buf.tensor(DType::f16, {kB, kSq, kHq});
  EXPECT_TRUE(rejected_with(a, "Q must have rank 4 [B, Sq, Hq, Dqk], found rank 3 [2, 16, 4]"));
  a = dense_args(buf);
  a.o = TensorView{};
  EXPECT_TRUE(rejected_with(a, "O is required (rank 4 [B, Sq, Hq, Dv]) but was not given"));
  a = dense_args(buf);
  a.lse = buf.tensor(DType::f32, {kB, kHq});
  EXPECT_TRUE(rejected_with(a, "LSE must have rank 3 [B, Hq, Sq], found rank 2 [2, 4]"));
  a = dense_args(buf);
  a.k.rank = 9;
  EXPECT_TRUE(rejected_with(a, "K must have rank 4 [B, Sk, Hkv, Dqk], found rank 9"));
}

TEST(Validate, ShapeMismatch) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.v = buf.tensor(DType::f16, {kB, kSk + 1, kHkv, kDv});
  EXPECT_TRUE(rejected_with(
      a, "V must have shape [B, Sk, Hkv, Dv] = [2, 40, 2, 32], found [2, 41, 2, 32]"));
  a = dense_args(buf);
  a.k = buf.tensor(DType::f16, {kB + 1, kSk, kHkv, kDqk});
  EXPECT_TRUE(rejected_with(
      a, "K must have shape [B, Sk, Hkv, Dqk] = [2, 40, 2, 64], found [3, 40, 2, 64]"));
  a = dense_args(buf);
  a.o = buf.tensor(DType::f32, {kB, kSq, kHq, kDqk});
  EXPECT_TRUE(
      rejected_with(a, "O must have shape [B, Sq, Hq, Dv] = [2, 16, 4, 32], found [2, 16, 4, 64]"));
  a = dense_args(buf);
  a.k_mean = buf.tensor(DType::f32, {kB, kHq, kDqk});
  EXPECT_TRUE(
      rejected_with(a, "k_mean must have shape [B, Hkv, Dqk] = [2, 2, 64], found [2, 4, 64]"));
  a = dense_args(buf);
  a.q = make_view(a.q.data, DType::f16, {kB, -1, kHq, kDqk}, a.q.bytes);
  EXPECT_TRUE(rejected_with(a, "Q axis 1 must have a size >= 0, found -1 (shape [2, -1, 4, 64])"));
}

TEST(Validate, WrongElementType) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.q = buf.tensor(DType::i32, {kB, kSq, kHq, kDqk});
  EXPECT_TRUE(rejected_with(a,
                            "Q must be f32, f16, bf16 or an MX element type (e4m3, e5m2, e2m3, "
                            "e3m2, e2m1), found i32"));
  a = dense_args(buf);
  a.o = buf.tensor(DType::e4m3, {kB, kSq, kHq, kDv});
  EXPECT_TRUE(rejected_with(a, "O must be f32, f16 or bf16, found e4m3"));
  a = dense_args(buf);
  a.lse = buf.tensor(DType::f16, {kB, kHq, kSq});
  EXPECT_TRUE(rejected_with(a, "LSE must be f32, found f16"));
}

TEST(Validate, BadGqaRatio) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.k = buf.tensor(DType::f16, {kB, kSk, 3, kDqk});
  a.v = buf.tensor(DType::f16, {kB, kSk, 3, kDv});
  EXPECT_TRUE(rejected_with(
      a, "Q heads Hq = 4 must be a multiple of the K/V heads Hkv = 3 (grouped-query attention)"));
  a.k = buf.tensor(DType::f16, {kB, kSk, 0, kDqk});
  a.v = buf.tensor(DType::f16, {kB, kSk, 0, kDv});
  EXPECT_TRUE(rejected_with(a, "K heads Hkv (axis 2) must be >= 1, found 0"));
}

TEST(Validate, MxHeadDimNotAMultipleOf32) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.q = buf.tensor(DType::e4m3, {kB, kSq, kHq, 48});
  a.k = buf.tensor(DType::f16, {kB, kSk, kHkv, 48});
  EXPECT_TRUE(rejected_with(
      a,
      "Q is e4m3 (MX, blocks of 32 along the head dim): Dqk must be a multiple of 32, found 48"));
  a = mx_args(buf, VScaleAxis::head_dim);
  a.v = buf.tensor(DType::e2m1, {kB, kSk, kHkv, 40});
  a.o = buf.tensor(DType::f32, {kB, kSq, kHq, 40});
  EXPECT_TRUE(rejected_with(
      a, "V is e2m1 (MX, blocks of 32 along the head dim): Dv must be a multiple of 32, found 40"));
  // With V's blocks along the keys its head dim is free.
  a.v_scale_axis = VScaleAxis::keys;
  a.v_scales = buf.tensor(DType::e8m0, {kB, kHkv, 2, 40});
  EXPECT_EQ(accepted(a).dim_v, 40);
}

TEST(Validate, UnderBackedData) {
  Buffers buf;
  const AttentionArgs valid = dense_args(buf);
  AttentionArgs a = valid;
  a.q = short_by_one_byte(a.q);
  EXPECT_TRUE(
      rejected_with(a, "Q needs 16384 bytes for shape [2, 16, 4, 64] but only 16383 are backed"));
  a = valid;
  a.k = short_by_one_byte(a.k);
  EXPECT_TRUE(
      rejected_with(a, "K needs 20480 bytes for shape [2, 40, 2, 64] but only 20479 are backed"));
  a = valid;
  a.v = short_by_one_byte(a.v);
  EXPECT_TRUE(
      rejected_with(a, "V needs 10240 bytes for shape [2, 40, 2, 32] but only 10239 are backed"));
  a = valid;
  a.o = short_by_one_byte(a.o);
  EXPECT_TRUE(
      rejected_with(a, "O needs 16384 bytes for shape [2, 16, 4, 32] but only 16383 are backed"));
  // A strided view needs the bytes up to its farthest element, not its element count.
  a = valid;
  a.q.stride[0] *= 2;
  EXPECT_TRUE(
      rejected_with(a, "Q needs 24576 bytes for shape [2, 16, 4, 64] but only 16384 are backed"));
  a = valid;
  a.q.data = nullptr;
  EXPECT_TRUE(rejected_with(a, "Q has a null data pointer but needs 16384 bytes"));
}

TEST(Validate, UnderBackedScales) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.q = buf.tensor(DType::e4m3, {1, 4, 8, 128});
  a.k = buf.tensor(DType::e4m3, {1, 128, 8, 128});
  a.v = buf.tensor(DType::f16, {1, 128, 8, kDv});
  a.o = buf.tensor(DType::f16, {1, 4, 8, kDv});
  a.q_scales = buf.tensor(DType::e8m0, {1, 4, 8, 4});
  a.k_scales = buf.tensor(DType::e8m0, {1, 128, 8, 4});
  EXPECT_EQ(accepted(a).dim_qk, 128);
  a.k_scales.bytes = 3072;
  EXPECT_TRUE(rejected_with(
      a, "K scales need 4096 bytes for shape [1, 128, 8, 4] but only 3072 are backed"));
}

// Scales of exactly their logical size work for every input and both V layouts; a byte less fails.
TEST(Validate, LogicalSizeScalesAcceptedOneByteLessRejected) {
  for (VScaleAxis axis : {VScaleAxis::head_dim, VScaleAxis::keys}) {
    SCOPED_TRACE(axis == VScaleAxis::head_dim ? "V scales along the head dim" : "along the keys");
    Buffers buf;
    const AttentionArgs valid = mx_args(buf, axis);
    EXPECT_EQ(valid.k_scales.bytes, kB * kSk * kHkv * 2);
    accepted(valid);
    AttentionArgs a = valid;
    a.q_scales = short_by_one_byte(a.q_scales);
    EXPECT_TRUE(rejected_with(
        a, "Q scales need 256 bytes for shape [2, 16, 4, 2] but only 255 are backed"));
    a = valid;
    a.k_scales = short_by_one_byte(a.k_scales);
    EXPECT_TRUE(rejected_with(
        a, "K scales need 320 bytes for shape [2, 40, 2, 2] but only 319 are backed"));
    a = valid;
    a.v_scales = short_by_one_byte(a.v_scales);
    EXPECT_TRUE(rejected_with(a, axis == VScaleAxis::head_dim
                                     ? "V scales need 160 bytes for shape [2, 40, 2, 1] but only "
                                       "159 are backed"
                                     : "V scales need 256 bytes for shape [2, 2, 2, 32] but only "
                                       "255 are backed"));
    // Packed data: FP6 K (48 bytes a row of 64) and FP4 V (16 bytes a row of 32).
    a = valid;
    a.k = short_by_one_byte(a.k);
    EXPECT_TRUE(
        rejected_with(a, "K needs 7680 bytes for shape [2, 40, 2, 64] but only 7679 are backed"));
    a = valid;
    a.v = short_by_one_byte(a.v);
    EXPECT_TRUE(
        rejected_with(a, "V needs 2560 bytes for shape [2, 40, 2, 32] but only 2559 are backed"));
  }
}

TEST(Validate, MissingScales) {
  Buffers buf;
  AttentionArgs a = mx_args(buf, VScaleAxis::head_dim);
  a.k_scales = TensorView{};
  EXPECT_TRUE(rejected_with(a,
                            "K scales are required because K is e2m3 (MX): expected e8m0 "
                            "[B, Sk, Hkv, Dqk/32] = [2, 40, 2, 2]"));
  a = mx_args(buf, VScaleAxis::keys);
  a.v_scales = TensorView{};
  EXPECT_TRUE(rejected_with(a,
                            "V scales are required because V is e2m1 (MX): expected e8m0 "
                            "[B, Hkv, ceil(Sk/32), Dv] = [2, 2, 2, 32]"));
}

TEST(Validate, ScalesOfTheWrongLayoutOrType) {
  Buffers buf;
  AttentionArgs a = mx_args(buf, VScaleAxis::keys);
  a.v_scales = buf.tensor(DType::e8m0, {kB, kSk, kHkv, kDv / 32});
  EXPECT_TRUE(rejected_with(a,
                            "V scales must have shape [B, Hkv, ceil(Sk/32), Dv] = [2, 2, 2, 32], "
                            "found [2, 40, 2, 1]"));
  a = mx_args(buf, VScaleAxis::head_dim);
  a.q_scales = buf.tensor(DType::f32, {kB, kSq, kHq, kDqk / 32});
  EXPECT_TRUE(rejected_with(a, "Q scales must be e8m0, found f32"));
  a = mx_args(buf, VScaleAxis::head_dim);
  a.v_scale_axis = VScaleAxis(5);
  EXPECT_TRUE(rejected_with(a, "v_scale_axis must be head_dim or keys, found 5"));
}

TEST(Validate, ScalesForAnInputThatIsNotMx) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.q_scales = buf.tensor(DType::e8m0, {kB, kSq, kHq, kDqk / 32});
  EXPECT_TRUE(rejected_with(a, "Q scales given but Q is f16, not an MX element type"));
  a = mx_args(buf, VScaleAxis::head_dim);
  a.v = buf.tensor(DType::bf16, {kB, kSk, kHkv, kDv});
  EXPECT_TRUE(rejected_with(a, "V scales given but V is bf16, not an MX element type"));
}

TEST(Validate, BadStrides) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.k.stride[1] = -a.k.stride[1];
  EXPECT_TRUE(rejected_with(
      a, "K strides must be >= 0, found [5120, -128, 64, 1] for shape [2, 40, 2, 64]"));
  a = mx_args(buf, VScaleAxis::head_dim);
  a.k = permuted(buf.tensor(DType::e2m3, {kB, kSk, kDqk, kHkv}), {0, 1, 3, 2});
  EXPECT_TRUE(rejected_with(a,
                            "K is e2m3 (packed 4 to a group): its last axis needs stride 1, found "
                            "strides [5120, 128, 1, 2]"));
  a = mx_args(buf, VScaleAxis::head_dim);
  a.v.stride[2] = 33;  // rows of FP4 must start on a byte
  EXPECT_TRUE(rejected_with(a,
                            "V is e2m1 (packed 2 to a group): the stride of axis 2 must be a "
                            "multiple of 2, found strides [2560, 64, 33, 1]"));
}

TEST(Validate, KvLenOutOfRange) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.kv_len = buf.int32({kB}, {kSk, -1});
  EXPECT_TRUE(rejected_with(a, "kv_len[1] must be in [0, 40] (Sk), found -1"));
  a.kv_len = buf.int32({kB}, {kSk + 1, 3});
  EXPECT_TRUE(rejected_with(a, "kv_len[0] must be in [0, 40] (Sk), found 41"));
  a.kv_len = buf.int32({kB + 1}, {1, 2, 3});
  EXPECT_TRUE(rejected_with(a, "kv_len must have shape [B] = [2], found [3]"));
  a.kv_len = buf.tensor(DType::f32, {kB});
  EXPECT_TRUE(rejected_with(a, "kv_len must be i32 (int32), found f32"));
  a.kv_len = buf.int32({kB}, {0, kSk});
  const Problem p = accepted(a);
  EXPECT_EQ(p.kv_len(0), 0);
  EXPECT_EQ(p.kv_len(1), kSk);
}

TEST(Validate, SparseColumnsUnsorted) {
  Buffers buf;
  AttentionArgs a = sparse_args(buf);
  static_cast<int32_t*>(a.sparse.col_idx.data)[6 * 2 + 1] = 0;  // head 2, row 0: {0, 0, 2}
  EXPECT_TRUE(rejected_with(a,
                            "sparse col_idx must be strictly increasing within a row: at (b, h, "
                            "query block) = (0, 2, 0) key block 0 follows 0"));
  a = sparse_args(buf);
  static_cast<int32_t*>(a.sparse.row_ptr.data)[4 * 3 + 1] = 2;  // head 3: rows {2, 1}, {}, {0}
  static_cast<int32_t*>(a.sparse.row_ptr.data)[4 * 3 + 2] = 2;
  EXPECT_TRUE(rejected_with(a,
                            "sparse col_idx must be strictly increasing within a row: at (b, h, "
                            "query block) = (0, 3, 0) key block 1 follows 2"));
}

TEST(Validate, SparseColumnsOutOfRange) {
  Buffers buf;
  AttentionArgs a = sparse_args(buf);
  static_cast<int32_t*>(a.sparse.col_idx.data)[5] = 3;  // head 0, query block 2: {0, 1, 3}
  EXPECT_TRUE(rejected_with(a,
                            "sparse col_idx at (b, h, query block) = (0, 0, 2) must list key "
                            "blocks in [0, 3) (ceil(Sk / block_k)), found 3"));
  static_cast<int32_t*>(a.sparse.col_idx.data)[5] = 2;
  static_cast<int32_t*>(a.sparse.col_idx.data)[6 * 2] = -1;
  EXPECT_TRUE(rejected_with(a,
                            "sparse col_idx at (b, h, query block) = (0, 2, 0) must list key "
                            "blocks in [0, 3) (ceil(Sk / block_k)), found -1"));
  // Entries past a row's end are never read, whatever they hold.
  static_cast<int32_t*>(a.sparse.col_idx.data)[6 * 2] = 0;
  static_cast<int32_t*>(a.sparse.col_idx.data)[6 * 3 + 5] = -9;
  accepted(a);
}

TEST(Validate, SparseBadRowPointers) {
  Buffers buf;
  AttentionArgs a = sparse_args(buf);
  static_cast<int32_t*>(a.sparse.row_ptr.data)[4] = 1;  // head 1 starts at 1
  EXPECT_TRUE(rejected_with(a, "sparse row_ptr must start at 0 for (b, h) = (0, 1), found 1"));
  a = sparse_args(buf);
  static_cast<int32_t*>(a.sparse.row_ptr.data)[2] = 0;  // head 0: 0, 1, 0, 6
  EXPECT_TRUE(rejected_with(a,
                            "sparse row_ptr must be non-decreasing: at (b, h, query block) = "
                            "(0, 0, 1) it goes from 1 to 0"));
  a = sparse_args(buf);
  static_cast<int32_t*>(a.sparse.row_ptr.data)[3] = 7;  // head 0 ends past nnz_max = 6
  EXPECT_TRUE(rejected_with(a,
                            "sparse row_ptr at (b, h, query block) = (0, 0, 2) ends at 7, past "
                            "the 6 entries of sparse col_idx"));
  a = sparse_args(buf);
  a.sparse.row_ptr = buf.int32({1, kHq, 3}, std::vector<int32_t>(kHq * 3, 0));
  EXPECT_TRUE(rejected_with(a,
                            "sparse row_ptr must have shape [Bx, Hx, ceil(Sq / block_q) + 1] (Bx "
                            "1 or B, Hx 1 or Hq) = [1, 4, 4], found [1, 4, 3]"));
  a = sparse_args(buf);
  a.sparse.row_ptr = buf.int32({1, 3, 4}, std::vector<int32_t>(3 * 4, 0));
  EXPECT_TRUE(rejected_with(a,
                            "sparse row_ptr must have shape [Bx, Hx, ceil(Sq / block_q) + 1] (Bx "
                            "1 or B, Hx 1 or Hq) = [1, 4, 4], found [1, 3, 4]"));
  a = sparse_args(buf);
  a.sparse.col_idx = buf.int32({kB, kHq, 1}, std::vector<int32_t>(kB * kHq, 0));
  EXPECT_TRUE(rejected_with(
      a, "sparse col_idx must have shape [Bx, Hx, nnz_max] = [1, 4, 1], found [2, 4, 1]"));
  a = sparse_args(buf);
  a.sparse.col_idx = permuted(buf.int32({6, kHq, 1}, std::vector<int32_t>(6 * kHq, 0)), {2, 1, 0});
  EXPECT_TRUE(rejected_with(
      a, "sparse col_idx must have stride 1 on its last axis, found strides [1, 1, 4]"));
  a = sparse_args(buf);
  a.sparse.row_ptr = TensorView{};
  EXPECT_TRUE(rejected_with(a, "sparse col_idx given without sparse row_ptr"));
}

TEST(Validate, SparseBlockSizes) {
  Buffers buf;
  AttentionArgs a = sparse_args(buf);
  for (int32_t bad : {0, 8, 48, 512}) {
    a.sparse.block_q = bad;
    EXPECT_TRUE(rejected_with(
        a, "block_q must be a power of two in [16, 256], found " + std::to_string(bad)));
  }
  a = sparse_args(buf);
  a.sparse.block_k = 24;
  EXPECT_TRUE(rejected_with(a, "block_k must be a power of two in [16, 256], found 24"));
}

TEST(Validate, BadBlockTableEntry) {
  Buffers buf;
  AttentionArgs a = paged_args(buf);
  static_cast<int32_t*>(a.paged.block_table.data)[4] = int32_t(kPages);  // batch 1, page 1
  EXPECT_TRUE(rejected_with(a,
                            "block_table[1, 1] must be a page in [0, 7) (num_pages of K and V), "
                            "found 7; it holds keys [16, 32) of batch 1, below kv_len 20"));
  a = paged_args(buf);
  static_cast<int32_t*>(a.paged.block_table.data)[0] = -1;
  EXPECT_TRUE(rejected_with(a,
                            "block_table[0, 0] must be a page in [0, 7) (num_pages of K and V), "
                            "found -1; it holds keys [0, 16) of batch 0, below kv_len 48"));
  // Pages past kv_len are never read, so they are not checked.
  a = paged_args(buf);
  static_cast<int32_t*>(a.paged.block_table.data)[5] = -5;
  accepted(a);
  a.paged.block_table = buf.int32({kB + 1, kMaxPages}, std::vector<int32_t>(9, 0));
  EXPECT_TRUE(
      rejected_with(a, "block_table must have shape [B, max_pages] = [2, 3], found [3, 3]"));
  a.paged.block_table = TensorView{};
  EXPECT_TRUE(
      rejected_with(a, "block_table is required (rank 2 [B, max_pages]) but was not given"));
}

TEST(Validate, BadPageSize) {
  Buffers buf;
  AttentionArgs a = paged_args(buf);
  a.paged.page_size = -16;
  EXPECT_TRUE(rejected_with(a, "page_size must be >= 0 (0: dense K/V), found -16"));
  a.paged.page_size = 0;
  EXPECT_TRUE(rejected_with(
      a, "block_table given but page_size is 0 (dense K/V); set page_size for a paged cache"));
  a = paged_args(buf);
  a.paged.page_size = 8;
  EXPECT_TRUE(rejected_with(a,
                            "K must have shape [num_pages, page_size, Hkv, Dqk] = [7, 8, 2, 64], "
                            "found [7, 16, 2, 64]"));
  a = paged_args(buf);
  a.v = buf.tensor(DType::bf16, {kPages - 1, kPageSize, kHkv, kDv});
  EXPECT_TRUE(rejected_with(a,
                            "V must have shape [num_pages, page_size, Hkv, Dv] = [7, 16, 2, 32], "
                            "found [6, 16, 2, 32]"));
  // MX V blocks along the keys must not straddle pages.
  a = paged_args(buf);
  a.v = buf.tensor(DType::e5m2, {kPages, kPageSize, kHkv, kDv});
  a.v_scale_axis = VScaleAxis::keys;
  EXPECT_TRUE(rejected_with(
      a, "page_size must be a multiple of 32 when V is e5m2 with scales along the keys, found 16"));
}

TEST(Validate, PrefixCausalNeedsOffsets) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.causal = Causal::prefix;
  EXPECT_TRUE(rejected_with(
      a, "prefix_offset is required with causal prefix: expected i32 (int32) [B] = [2]"));
  a.prefix_offset = buf.int32({kB}, {INT32_MIN, INT32_MAX});  // any offset is a valid alignment
  EXPECT_EQ(accepted(a).causal_offset(1), INT32_MAX);
  a.causal = Causal::bottom_right;
  EXPECT_TRUE(rejected_with(a, "prefix_offset given but causal is not prefix"));
  a.causal = Causal(9);
  EXPECT_TRUE(rejected_with(a, "causal must be none, top_left, bottom_right or prefix, found 9"));
}

TEST(Validate, BadScale) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.scale = NAN;
  EXPECT_TRUE(rejected_with(a, "scale must be finite, found nan"));
  a.scale = -INFINITY;
  EXPECT_TRUE(rejected_with(a, "scale must be finite, found -inf"));
  a.scale = -0.25f;
  EXPECT_EQ(accepted(a).scale, -0.25f);
}

TEST(Validate, OverflowOf64BitSizes) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  // Zero strides keep the bytes small; the element count still overflows.
  a.q = make_view(a.q.data, DType::f32, {1, 1, 1, 64}, a.q.bytes);
  a.q.shape[0] = a.q.shape[1] = int64_t(1) << 32;
  a.q.stride[0] = a.q.stride[1] = 0;
  a.k = buf.tensor(DType::f16, {int64_t(1) << 32, 0, 1, kDqk});
  a.v = buf.tensor(DType::f16, {int64_t(1) << 32, 0, 1, kDv});
  EXPECT_TRUE(rejected_with(a,
                            "the size of Q (shape [4294967296, 4294967296, 1, 64], strides "
                            "[0, 0, 64, 1], f32) overflows 64-bit sizes"));
  a = dense_args(buf);
  a.lse = buf.tensor(DType::f32, {kB, kHq, kSq});
  a.lse.stride[0] = int64_t(1) << 62;
  EXPECT_TRUE(rejected_with(a,
                            "the size of LSE (shape [2, 4, 16], strides [4611686018427387904, 16, "
                            "1], f32) overflows 64-bit sizes"));
  a = paged_args(buf);
  a.kv_len = TensorView{};
  a.paged.page_size = int64_t(1) << 40;
  a.paged.block_table.shape[1] = int64_t(1) << 30;
  a.paged.block_table.stride[0] = a.paged.block_table.stride[1] = 0;
  EXPECT_TRUE(rejected_with(a,
                            "the key length max_pages * page_size = 1073741824 * 1099511627776 "
                            "of block_table overflows 64-bit sizes"));
}

// Views past 2^31 elements are valid: here K and V broadcast one key over 2^33 positions.
TEST(Validate, SizesPast32BitsAreAccepted) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  const int64_t keys = int64_t(1) << 33;
  a.k = buf.tensor(DType::f16, {kB, 1, kHkv, kDqk});
  a.k.shape[1] = keys;
  a.k.stride[1] = 0;
  a.v = buf.tensor(DType::f16, {kB, 1, kHkv, kDv});
  a.v.shape[1] = keys;
  a.v.stride[1] = 0;
  a.kv_len = buf.int32({kB}, {INT32_MAX, 7});
  const Problem p = accepted(a);
  EXPECT_EQ(p.seq_k, keys);
  EXPECT_EQ(p.kv_len(0), INT32_MAX);
}

TEST(Validate, BadSplitOptions) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.split.split_kv = -1;
  EXPECT_TRUE(rejected_with(a, "split_kv must be in [0, 1024] (0: auto), found -1"));
  a.split.split_kv = 1025;
  EXPECT_TRUE(rejected_with(a, "split_kv must be in [0, 1024] (0: auto), found 1025"));
  a.split.split_kv = 4;
  a.split.tile_m = -1;
  EXPECT_TRUE(rejected_with(a, "tile_m must be >= 0 (0: the engine's choice), found -1"));
  a.split.tile_m = 0;
  a.split.tile_n = -64;
  EXPECT_TRUE(rejected_with(a, "tile_n must be >= 0 (0: the engine's choice), found -64"));
  a.split.tile_n = 0;
  a.split.auto_target = -2;
  EXPECT_TRUE(rejected_with(a, "auto_target must be >= 0 (0: the engine's choice), found -2"));
  a.split.auto_target = 0;
  a.split.partial_o = buf.tensor(DType::f32, {4, kB, kSq, kHq, kDv});
  a.split.partial_lse = buf.tensor(DType::f32, {3, kB, kHq, kSq});
  EXPECT_TRUE(rejected_with(
      a, "partial_lse must have shape [S, B, Hq, Sq] = [4, 2, 4, 16], found [3, 2, 4, 16]"));
  a.split.partial_lse = TensorView{};
  a.split.partial_o = buf.tensor(DType::f32, {0, kB, kSq, kHq, kDv});
  EXPECT_TRUE(rejected_with(a, "partial_o must hold at least 1 split (S, axis 0), found 0"));
  a.split.partial_o = buf.tensor(DType::bf16, {4, kB, kSq, kHq, kDv});
  EXPECT_TRUE(rejected_with(a, "partial_o must be f32, found bf16"));
  a.split.partial_o = TensorView{};
  a.split.counts = buf.tensor(DType::i32, {kB, kSq, kHq});
  EXPECT_TRUE(
      rejected_with(a, "counts must have shape [B, Hq, Sq] = [2, 4, 16], found [2, 16, 4]"));
}

TEST(Validate, PartialSlotsTooFew) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  EXPECT_TRUE(validate_partial_slots(a, 64));  // no partials asked for: any plan fits
  a.split.partial_o = buf.tensor(DType::f32, {2, kB, kSq, kHq, kDv});
  a.split.partial_lse = buf.tensor(DType::f32, {2, kB, kHq, kSq});
  accepted(a);
  EXPECT_TRUE(validate_partial_slots(a, 2));
  const Status st = validate_partial_slots(a, 4);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "partial_o holds 2 splits (S, axis 0) but the plan needs 4 slots");
  a.split.partial_o = TensorView{};
  EXPECT_EQ(validate_partial_slots(a, 3).message(),
            "partial_lse holds 2 splits (S, axis 0) but the plan needs 3 slots");
}

CombineArgs combine_args(Buffers& buf, const std::vector<int32_t>& counts) {
  CombineArgs c;
  c.partial_o = buf.tensor(DType::f16, {3, 2, 5, 2, 8});
  c.partial_lse = buf.tensor(DType::f32, {3, 2, 2, 5});
  c.counts = buf.int32({2, 2, 5}, counts);
  c.o = buf.tensor(DType::bf16, {2, 5, 2, 8});
  c.lse = buf.tensor(DType::f32, {2, 2, 5});
  return c;
}

TEST(ValidateCombine, CountsOutOfRange) {
  Buffers buf;
  std::vector<int32_t> counts(20, 3);
  counts[0] = 0;
  EXPECT_TRUE(validate_combine(combine_args(buf, counts)));
  counts[13] = 4;  // b 1, h 0, row 3
  Status st = validate_combine(combine_args(buf, counts));
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "counts[1, 0, 3] must be in [0, 3] (S), found 4");
  counts[13] = 1;
  counts[6] = -1;
  EXPECT_EQ(validate_combine(combine_args(buf, counts)).message(),
            "counts[0, 1, 1] must be in [0, 3] (S), found -1");
}

TEST(ValidateCombine, ShapesAndTypes) {
  Buffers buf;
  const std::vector<int32_t> counts(20, 1);
  CombineArgs c = combine_args(buf, counts);
  c.partial_lse = buf.tensor(DType::f32, {2, 2, 2, 5});
  EXPECT_EQ(validate_combine(c).message(),
            "partial_lse must have shape [S, B, Hq, Sq] = [3, 2, 2, 5], found [2, 2, 2, 5]");
  c = combine_args(buf, counts);
  c.o = buf.tensor(DType::e4m3, {2, 5, 2, 8});
  EXPECT_EQ(validate_combine(c).message(), "O must be f32, f16 or bf16, found e4m3");
  c = combine_args(buf, counts);
  c.counts = TensorView{};
  EXPECT_EQ(validate_combine(c).message(),
            "counts is required (rank 3 [B, Hq, Sq]) but was not given");
  c = combine_args(buf, counts);
  c.lse = short_by_one_byte(c.lse);
  EXPECT_EQ(validate_combine(c).message(),
            "LSE needs 80 bytes for shape [2, 2, 5] but only 79 are backed");
  c = combine_args(buf, counts);
  c.partial_o = buf.tensor(DType::f32, {0, 2, 5, 2, 8});
  EXPECT_EQ(validate_combine(c).message(),
            "partial_o must hold at least 1 split (S, axis 0), found 0");
}

// --- valid problems ------------------------------------------------------------------------------

TEST(ValidProblem, Dense) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.kv_len = buf.int32({kB}, {33, 40});
  a.lse = buf.tensor(DType::f32, {kB, kHq, kSq});
  a.k_mean = buf.tensor(DType::f32, {kB, kHkv, kDqk});
  a.causal = Causal::bottom_right;
  a.window = 8;
  const Problem p = accepted(a);
  EXPECT_EQ(p.batch, kB);
  EXPECT_EQ(p.seq_q, kSq);
  EXPECT_EQ(p.seq_k, kSk);
  EXPECT_EQ(p.heads_q, kHq);
  EXPECT_EQ(p.heads_kv, kHkv);
  EXPECT_EQ(p.group, 2);
  EXPECT_EQ(p.dim_qk, kDqk);
  EXPECT_EQ(p.dim_v, kDv);
  EXPECT_EQ(p.scale, 0.125f);
  EXPECT_FALSE(p.paged);
  EXPECT_EQ(p.page_size, 0);
  EXPECT_EQ(p.max_pages, 0);
  EXPECT_EQ(p.num_pages, 0);
  EXPECT_FALSE(p.sparse);
  EXPECT_EQ(p.args.q.data, a.q.data);
  EXPECT_EQ(p.args.window, 8);
  EXPECT_EQ(p.kv_len(0), 33);
  EXPECT_EQ(p.causal_offset(0), 33 - kSq);
  EXPECT_TRUE(validate(a).is_ok());
}

TEST(ValidProblem, OddGroupAndDifferentHeadDims) {
  Buffers buf;
  AttentionArgs a;
  a.q = buf.tensor(DType::bf16, {1, 3, 6, 192});
  a.k = buf.tensor(DType::f32, {1, 5, 2, 192});
  a.v = buf.tensor(DType::f16, {1, 5, 2, 128});
  a.o = buf.tensor(DType::f16, {1, 3, 6, 128});
  const Problem p = accepted(a);
  EXPECT_EQ(p.group, 3);
  EXPECT_EQ(p.dim_qk, 192);
  EXPECT_EQ(p.dim_v, 128);
  EXPECT_EQ(p.scale, float(1.0 / std::sqrt(192.0)));
}

// Zero B, Sq or Sk is a problem with no work (or only empty rows), not an error.
TEST(ValidProblem, ZeroSizes) {
  Buffers buf;
  AttentionArgs a;
  a.q = buf.tensor(DType::f16, {0, kSq, kHq, kDqk});
  a.k = buf.tensor(DType::f16, {0, kSk, kHkv, kDqk});
  a.v = buf.tensor(DType::f16, {0, kSk, kHkv, kDv});
  a.o = buf.tensor(DType::f16, {0, kSq, kHq, kDv});
  EXPECT_EQ(accepted(a).batch, 0);
  a.q = buf.tensor(DType::f16, {0, int64_t(1) << 40, kHq, kDqk});  // no elements, however long
  a.o = buf.tensor(DType::f16, {0, int64_t(1) << 40, kHq, kDv});
  EXPECT_EQ(accepted(a).seq_q, int64_t(1) << 40);
  a = dense_args(buf);
  a.q = buf.tensor(DType::f16, {kB, 0, kHq, kDqk});
  a.o = buf.tensor(DType::f32, {kB, 0, kHq, kDv});
  a.lse = buf.tensor(DType::f32, {kB, kHq, 0});
  EXPECT_EQ(accepted(a).seq_q, 0);
  a = dense_args(buf);
  a.k = buf.tensor(DType::f16, {kB, 0, kHkv, kDqk});
  a.v = buf.tensor(DType::f16, {kB, 0, kHkv, kDv});
  EXPECT_EQ(accepted(a).seq_k, 0);
}

TEST(ValidProblem, Paged) {
  Buffers buf;
  const Problem p = accepted(paged_args(buf));
  EXPECT_TRUE(p.paged);
  EXPECT_EQ(p.page_size, kPageSize);
  EXPECT_EQ(p.max_pages, kMaxPages);
  EXPECT_EQ(p.num_pages, kPages);
  EXPECT_EQ(p.seq_k, kMaxPages * kPageSize);
  EXPECT_EQ(p.kv_page(1, 17), 1);
  EXPECT_EQ(p.kv_page(0, 47), 5);
  EXPECT_EQ(p.kv_slot(17), 1);
}

TEST(ValidProblem, Sparse) {
  Buffers buf;
  const Problem p = accepted(sparse_args(buf));
  EXPECT_TRUE(p.sparse);
  EXPECT_EQ(p.q_blocks, 3);
  EXPECT_EQ(p.k_blocks, 3);
  const Problem::SparseRow row = p.sparse_row(1, 2, 2);  // broadcast over the batch
  ASSERT_EQ(row.count, 2);
  EXPECT_EQ(row.cols[0], 1);
  EXPECT_EQ(row.cols[1], 2);
  EXPECT_EQ(p.sparse_row(0, 1, 0).count, 0);

  // One layout per (b, h), no broadcast.
  AttentionArgs a = sparse_args(buf);
  std::vector<int32_t> row_ptr, col_idx;
  for (int64_t bh = 0; bh < kB * kHq; ++bh) {
    row_ptr.insert(row_ptr.end(), {0, 1, 2, 3});
    col_idx.insert(col_idx.end(), {0, 1, int32_t(bh % 3)});
  }
  a.sparse.row_ptr = buf.int32({kB, kHq, 4}, row_ptr);
  a.sparse.col_idx = buf.int32({kB, kHq, 3}, col_idx);
  EXPECT_EQ(accepted(a).sparse_row(1, 3, 2).cols[0], 7 % 3);
}

TEST(ValidProblem, MxWithBothValueScaleAxes) {
  for (VScaleAxis axis : {VScaleAxis::head_dim, VScaleAxis::keys}) {
    SCOPED_TRACE(axis == VScaleAxis::head_dim ? "V scales along the head dim" : "along the keys");
    Buffers buf;
    const Problem p = accepted(mx_args(buf, axis));
    EXPECT_EQ(p.args.v_scale_axis, axis);
    EXPECT_EQ(p.dim_qk, kDqk);
    EXPECT_EQ(p.scale, 0.125f);
  }
  // Paged MX: K scales paged like K, V scales along the keys [num_pages, Hkv, page_size/32, Dv].
  Buffers buf;
  AttentionArgs a = paged_args(buf);
  a.k = buf.tensor(DType::e4m3, {kPages, 32, kHkv, kDqk});
  a.v = buf.tensor(DType::e3m2, {kPages, 32, kHkv, kDv});
  a.k_scales = buf.tensor(DType::e8m0, {kPages, 32, kHkv, kDqk / 32});
  a.v_scales = buf.tensor(DType::e8m0, {kPages, kHkv, 1, kDv});
  a.v_scale_axis = VScaleAxis::keys;
  a.paged.page_size = 32;
  const Problem p = accepted(a);
  EXPECT_EQ(p.seq_k, 96);
  a.v_scales = short_by_one_byte(a.v_scales);
  EXPECT_TRUE(
      rejected_with(a, "V scales need 448 bytes for shape [7, 2, 1, 32] but only 447 are backed"));
}

TEST(ValidProblem, SplitOptions) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.split.split_kv = 0;
  a.split.tile_m = 16;
  a.split.tile_n = 128;
  a.split.early_exit = true;
  a.split.partial_o = buf.tensor(DType::f32, {8, kB, kSq, kHq, kDv});
  a.split.partial_lse = buf.tensor(DType::f32, {8, kB, kHq, kSq});
  a.split.counts = buf.tensor(DType::i32, {kB, kHq, kSq});
  accepted(a);
  a.split.split_kv = 1024;
  accepted(a);
}

// A window wider than every key shows the same keys as W = Sk; the problem keeps it in range.
TEST(ValidProblem, HugeWindowIsEquivalentToSk) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.window = INT64_MAX;
  a.causal = Causal::top_left;
  EXPECT_EQ(accepted(a).args.window, kSk);
  a.window = -5;
  EXPECT_EQ(accepted(a).args.window, -5);
}

// Validation reads inputs and metadata only: outputs keep their bytes, valid or not.
TEST(ValidProblem, OutputsAreNeverTouched) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.lse = buf.tensor(DType::f32, {kB, kHq, kSq});
  std::memset(a.o.data, 0x5a, size_t(a.o.bytes));
  std::memset(a.lse.data, 0xa5, size_t(a.lse.bytes));
  accepted(a);
  a.kv_len = buf.int32({kB}, {-1, 0});
  EXPECT_FALSE(validate(a).is_ok());
  EXPECT_FALSE(attention(a).is_ok());
  const auto* o = static_cast<const uint8_t*>(a.o.data);
  const auto* lse = static_cast<const uint8_t*>(a.lse.data);
  for (int64_t i = 0; i < a.o.bytes; ++i) ASSERT_EQ(o[i], 0x5a) << i;
  for (int64_t i = 0; i < a.lse.bytes; ++i) ASSERT_EQ(lse[i], 0xa5) << i;
}

TEST(ValidProblem, PublicValidateGivesTheSameMessage) {
  Buffers buf;
  AttentionArgs a = dense_args(buf);
  a.k = short_by_one_byte(a.k);
  const Status st = validate(a);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "K needs 20480 bytes for shape [2, 40, 2, 64] but only 20479 are backed");
}

}  // namespace
}  // namespace mxattn::core
