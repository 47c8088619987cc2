// Cache writes on the host (spec §11): the bytes of every cache format equal quantizing each token
// on its own and placing it by hand; writing step by step equals writing at once; bad arguments
// are named errors with nothing written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cpu/kv_write_cases.h"
#include "mxattn/kv_cache.h"

namespace mxattn::test {
namespace {

void expect_bytes_equal(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                        const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t first = want.size();
  int64_t differing = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) {
      if (first == want.size()) first = i;
      ++differing;
    }
  }
  EXPECT_EQ(differing, 0) << what << ": first differing byte " << first << " (want "
                          << int(want[first < want.size() ? first : 0]) << ", got "
                          << int(got[first < got.size() ? first : 0]) << ")";
}

void expect_written_as_by_hand(const KvBuffers& b) {
  const KvExpected want = expected_after_write(b);
  expect_bytes_equal(want.k_cache, b.k_cache, "k_cache");
  expect_bytes_equal(want.v_cache, b.v_cache, "v_cache");
  expect_bytes_equal(want.k_scales, b.k_scales, "k_scales");
  expect_bytes_equal(want.v_scales, b.v_scales, "v_scales");
}

TEST(WriteKv, EveryFormatEqualsQuantizingEachTokenByHand) {
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    const KvCase c = random_kv_case(seed);
    SCOPED_TRACE(c.describe());
    KvBuffers b(c);
    const KvExpected want = expected_after_write(b);
    ASSERT_TRUE(write_kv(b.args()).is_ok());
    expect_written_as_by_hand(b);
  }
}

// Every cache format pair at least once, with and without the transforms.
TEST(WriteKv, EachFormatPairAndTransform) {
  const DType types[] = {DType::bf16, DType::f16,  DType::e4m3, DType::e5m2,
                         DType::e2m3, DType::e3m2, DType::e2m1};
  uint64_t seed = 1000;
  for (DType k : types) {
    for (DType v : types) {
      KvCase c = random_kv_case(seed++);
      c.k_type = k;
      c.v_type = v;
      c.rotate_k = seed % 3 == 0;
      c.k_mean = seed % 2 == 0;
      SCOPED_TRACE(c.describe());
      KvBuffers b(c);
      ASSERT_TRUE(write_kv(b.args()).is_ok());
      expect_written_as_by_hand(b);
    }
  }
}

// Tokens written one step at a time (one token a call) give the bits of one call for all of them:
// a token's codes and scales depend on that token alone.
TEST(WriteKv, StepByStepEqualsAtOnce) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const KvCase c = random_kv_case(seed + 500);
    SCOPED_TRACE(c.describe());
    KvBuffers all(c), steps(c);
    ASSERT_TRUE(write_kv(all.args()).is_ok());
    for (int64_t t = 0; t < c.tokens; ++t) {
      KvWriteArgs a = steps.args();
      for (TensorView* v : {&a.k, &a.v}) {
        v->data = static_cast<uint8_t*>(v->data) + t * v->stride[0] * bits_of(v->dtype) / 8;
        v->shape[0] = 1;
        v->bytes -= t * v->stride[0] * bits_of(v->dtype) / 8;
      }
      a.slot_mapping.data =
          static_cast<uint8_t*>(a.slot_mapping.data) + t * bits_of(a.slot_mapping.dtype) / 8;
      a.slot_mapping.shape[0] = 1;
      a.slot_mapping.bytes -= t * bits_of(a.slot_mapping.dtype) / 8;
      ASSERT_TRUE(write_kv(a).is_ok()) << "token " << t;
    }
    EXPECT_EQ(all.k_cache, steps.k_cache);
    EXPECT_EQ(all.v_cache, steps.v_cache);
    EXPECT_EQ(all.k_scales, steps.k_scales);
    EXPECT_EQ(all.v_scales, steps.v_scales);
  }
}

// A bad argument gives a message that names it, and no cache byte changes.
TEST(WriteKv, BadArgumentsAreNamedAndNothingIsWritten) {
  KvCase c;
  c.tokens = 6;
  c.k_type = DType::e4m3;
  c.v_type = DType::e2m1;
  const auto rejected = [&](const std::function<void(KvBuffers&, KvWriteArgs&)>& spoil,
                            const std::string& message) {
    KvBuffers b(c);
    KvWriteArgs a = b.args();
    spoil(b, a);
    const std::vector<uint8_t> k_cache = b.k_cache, v_cache = b.v_cache, k_scales = b.k_scales,
                               v_scales = b.v_scales;
    const Status st = write_kv(a);
    EXPECT_FALSE(st.is_ok()) << message;
    EXPECT_NE(st.message().find(message), std::string::npos) << st.message();
    EXPECT_EQ(b.k_cache, k_cache);
    EXPECT_EQ(b.v_cache, v_cache);
    EXPECT_EQ(b.k_scales, k_scales);
    EXPECT_EQ(b.v_scales, v_scales);
  };
  rejected([](KvBuffers& b, KvWriteArgs&) { b.slots[3] = 5 * 16; },
           "slot_mapping[3] = 80 lies past the caches (pages * page_size = 80 slots)");
  rejected([](KvBuffers& b, KvWriteArgs&) { b.slots[4] = b.slots[1] = 7; },
           "slot_mapping[1] and slot_mapping[4] both name slot 7");
  rejected([](KvBuffers&, KvWriteArgs& a) { a.k_cache.dtype = DType::f32; },
           "k_cache must be bf16, f16 or an MX element type");
  rejected([](KvBuffers&, KvWriteArgs& a) { a.v_cache.shape[2] = 3; },
           "v_cache must have shape [pages, page_size, Hkv, D]");
  rejected([](KvBuffers&, KvWriteArgs& a) { a.k_scales.bytes -= 1; }, "k_scales need");
  rejected([](KvBuffers&, KvWriteArgs& a) { a.v_scales = TensorView{}; }, "v_scales is required");
  rejected([](KvBuffers&, KvWriteArgs& a) { a.v_scale_axis = VScaleAxis::keys; },
           "v_scale_axis: write_kv appends V along the head dim only");
  rejected([](KvBuffers&, KvWriteArgs& a) { a.slot_mapping.dtype = DType::f32; },
           "slot_mapping must be i32 or i64");
  rejected(
      [](KvBuffers&, KvWriteArgs& a) {
        a.k.shape[1] = a.v.shape[1] = 1;
        set_contiguous_strides(a.k);
        set_contiguous_strides(a.v);
      },
      "k_cache must have shape [pages, page_size, Hkv, D]");
  rejected(
      [](KvBuffers&, KvWriteArgs& a) {
        a.rotate_k = true;
        a.k.shape[2] = a.k_cache.shape[3] = 96;
      },
      "");  // any error: the shapes no longer match the buffers
  rejected(
      [](KvBuffers&, KvWriteArgs& a) {
        a.k_cache.shape[3] = a.k.shape[2] = 48;
        a.k_scales.shape[3] = 1;
      },
      "k_cache is e4m3, quantized in blocks of 32 along the head dim: D must be a multiple of 32, "
      "found 48");
}

// Rotation needs a power-of-two head dim; a cache's head dim must be contiguous.
TEST(WriteKv, RotationAndLayoutRules) {
  KvCase c;
  c.k_type = c.v_type = DType::bf16;
  c.dim_k = 96;
  c.dim_v = 64;
  KvBuffers b(c);
  KvWriteArgs a = b.args();
  a.rotate_k = true;
  Status st = write_kv(a);
  EXPECT_NE(st.message().find("rotate_k: the Hadamard rotation needs Dqk a power of two, found 96"),
            std::string::npos)
      << st.message();
  a = b.args();
  a.k_cache.stride[2] = 1;  // head-dim-major inside a slot: backed, but not contiguous
  a.k_cache.stride[3] = a.k_cache.shape[2];
  st = write_kv(a);
  EXPECT_NE(st.message().find("k_cache needs a contiguous head dim (stride 1)"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace mxattn::test
