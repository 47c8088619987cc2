// The GPU's MX producers against the host (spec §5, §11), bitwise: quantize and dequantize of every
// format, scale mode and block axis, with NaN and Inf blocks, all-zero blocks, subnormal ranges,
// partial last blocks and padded outputs; cache writes with random slot mappings (skipped slots,
// pages out of order), rotation and smoothing; slots past the caches skipped and counted; a write
// captured in a CUDA graph and replayed with new tokens and slots; decode over a cache the GPU
// wrote equals decode over the host's. Every device buffer is its own allocation of exactly its
// bytes, so compute-sanitizer flags a read or write past a view.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/kv_write_cases.h"
#include "cuda/device_buffers.h"
#include "mx/kv_rows.h"
#include "mxattn/cuda.h"
#include "mxattn/kv_cache.h"
#include "mxattn/mx.h"

namespace mxattn::test {
namespace {

std::vector<uint8_t> bytes_of(const TensorView& v) {
  const uint8_t* p = static_cast<const uint8_t*>(v.data);
  return std::vector<uint8_t>(p, p + v.bytes);
}

// Values that stress a quantizer, block by block: ordinary, NaN/Inf, zero, subnormal, huge.
std::vector<uint8_t> stress_values(DType type, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> out(size_t(n * bits_of(type) / 8));
  for (int64_t i = 0; i < n; ++i) {
    const int kind = int((i / 32 * 7 + seed) % 6);
    float x = normal(rng);
    if (kind == 1 && i % 9 == 0) x = (i % 2) ? std::numeric_limits<float>::quiet_NaN() : -INFINITY;
    if (kind == 2) x = 0.0f;
    if (kind == 3) x *= 1e-39f;
    if (kind == 4) x *= type == DType::f16 ? 3e3f : 3e6f;
    if (kind == 5) x *= std::ldexp(1.0f, int(i % 40) - 20);
    mx::store_plain(out.data(), type, i, x);
  }
  return out;
}

const DType kFormats[] = {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1};

struct Layout {
  std::vector<int64_t> shape;
  int axis;
  int64_t pad = 0;  // extra positions data and scales hold along the block axis
};

TensorView view_with(DType type, std::vector<int64_t> shape, std::vector<uint8_t>& bytes,
                     uint8_t fill) {
  TensorView v;
  v.dtype = type;
  v.rank = int(shape.size());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = shape[size_t(i)];
  set_contiguous_strides(v);
  v.bytes = bytes_needed(v).value();
  bytes.assign(size_t(v.bytes), fill);
  v.data = bytes.data();
  return v;
}

TEST(CudaQuantize, EveryFormatModeAndAxisEqualsTheHost) {
  const Layout layouts[] = {{{2, 37, 3, 64}, 3}, {{2, 70, 3, 64}, 1}, {{1, 70, 2, 32}, 1, 26},
                            {{3, 96}, 1, 32},    {{5, 33, 8}, 1},     {{130}, 0}};
  uint64_t seed = 1;
  for (const DType src_type : {DType::f32, DType::bf16, DType::f16}) {
    for (const DType format : kFormats) {
      for (const ScaleMode mode : {ScaleMode::floor, ScaleMode::rceil}) {
        for (const Layout& layout : layouts) {
          SCOPED_TRACE(std::string(name_of(src_type)) + " -> " + std::string(name_of(format)) +
                       (mode == ScaleMode::rceil ? " rceil" : " floor") + " axis " +
                       std::to_string(layout.axis) + " seed " + std::to_string(seed));
          std::vector<int64_t> data_shape = layout.shape, scale_shape = layout.shape;
          data_shape[size_t(layout.axis)] += layout.pad;
          scale_shape[size_t(layout.axis)] = (data_shape[size_t(layout.axis)] + 31) / 32;
          std::vector<uint8_t> src_bytes, data_bytes, scale_bytes;
          TensorView src = view_with(src_type, layout.shape, src_bytes, 0);
          src_bytes = stress_values(src_type, src.numel(), seed++);
          src.data = src_bytes.data();
          TensorView data = view_with(format, data_shape, data_bytes, 0xcd);
          TensorView scales = view_with(DType::e8m0, scale_shape, scale_bytes, 0xcd);
          DeviceBytes d_src(src_bytes), d_data(data_bytes), d_scales(scale_bytes);
          ASSERT_TRUE(quantize(src, data, scales, layout.axis, mode).is_ok());
          const Status st = quantize(on_device(src, d_src), on_device(data, d_data),
                                     on_device(scales, d_scales), layout.axis, mode);
          ASSERT_TRUE(st.is_ok()) << st.message();
          check(cudaDeviceSynchronize(), "quantize");
          EXPECT_EQ(d_data.download(), data_bytes);
          EXPECT_EQ(d_scales.download(), scale_bytes);

          // And back: the GPU's dequantized values are the host's.
          std::vector<uint8_t> back_bytes;
          TensorView back = view_with(src_type, layout.shape, back_bytes, 0);
          DeviceBytes d_back(back_bytes);
          ASSERT_TRUE(dequantize(data, scales, layout.axis, back).is_ok());
          ASSERT_TRUE(dequantize(on_device(data, d_data), on_device(scales, d_scales), layout.axis,
                                 on_device(back, d_back))
                          .is_ok());
          check(cudaDeviceSynchronize(), "dequantize");
          const std::vector<uint8_t> got = d_back.download();
          for (int64_t i = 0; i < back.numel(); ++i) {
            const float want = mx::load_plain(back_bytes.data(), src_type, i);
            const float have = mx::load_plain(got.data(), src_type, i);
            ASSERT_TRUE(want == have || (std::isnan(want) && std::isnan(have)))
                << "element " << i << ": host " << want << ", GPU " << have;
          }
        }
      }
    }
  }
}

// quantize_keys (rotate, smooth over each sequence's valid keys, quantize) on the GPU gives the
// host's codes, scales and mean.
TEST(CudaQuantize, KeysWithRotationAndSmoothingEqualTheHost) {
  const int64_t B = 2, S = 300, H = 4, D = 128;
  uint64_t seed = 40;
  for (const DType src_type : {DType::bf16, DType::f32}) {
    for (const DType format : {DType::e4m3, DType::e3m2, DType::e2m1}) {
      for (const int variant : {0, 1, 2, 3}) {
        const bool rotate = variant & 1, smooth = variant & 2;
        SCOPED_TRACE(std::string(name_of(src_type)) + " -> " + std::string(name_of(format)) +
                     " rotate " + std::to_string(rotate) + " smooth " + std::to_string(smooth));
        std::vector<uint8_t> k_bytes, data_bytes, scale_bytes, mean_bytes;
        TensorView k = view_with(src_type, {B, S, H, D}, k_bytes, 0);
        k_bytes = stress_values(src_type, k.numel(), seed++);
        k.data = k_bytes.data();
        TensorView data = view_with(format, {B, S, H, D}, data_bytes, 0xcd);
        TensorView scales = view_with(DType::e8m0, {B, S, H, D / 32}, scale_bytes, 0xcd);
        TensorView mean = view_with(DType::f32, {B, H, D}, mean_bytes, 0);
        std::vector<int32_t> lens = {S, 123};
        DeviceBytes d_k(k_bytes), d_data(data_bytes), d_scales(scale_bytes), d_mean(mean_bytes),
            d_lens(lens);
        KeyTransforms t;
        t.rotate = rotate;
        KeyTransforms dt = t;
        if (smooth) {
          t.k_mean = mean;
          t.kv_len = make_view(lens.data(), DType::i32, {B});
          dt.k_mean = on_device(mean, d_mean);
          dt.kv_len = on_device(t.kv_len, d_lens);
        }
        ASSERT_TRUE(quantize_keys(k, data, scales, ScaleMode::rceil, t).is_ok());
        const Status st = quantize_keys(on_device(k, d_k), on_device(data, d_data),
                                        on_device(scales, d_scales), ScaleMode::rceil, dt);
        ASSERT_TRUE(st.is_ok()) << st.message();
        check(cudaDeviceSynchronize(), "quantize_keys");
        EXPECT_EQ(d_data.download(), data_bytes);
        EXPECT_EQ(d_scales.download(), scale_bytes);
        if (smooth) {
          EXPECT_EQ(d_mean.download(), mean_bytes);
        }
      }
    }
  }
}

// A quantize with the source on the GPU and the outputs on the host is refused by name.
TEST(CudaQuantize, MixedMemoryIsRefused) {
  std::vector<uint8_t> src_bytes, data_bytes, scale_bytes;
  TensorView src = view_with(DType::f32, {4, 64}, src_bytes, 0);
  TensorView data = view_with(DType::e4m3, {4, 64}, data_bytes, 0);
  TensorView scales = view_with(DType::e8m0, {4, 2}, scale_bytes, 0);
  DeviceBytes d_src(src_bytes);
  const Status st = quantize(on_device(src, d_src), data, scales, 1, ScaleMode::floor);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.message().find("data is in host memory but src is in device memory"),
            std::string::npos)
      << st.message();
}

// A case's buffers on the GPU and its arguments there.
struct DeviceKv {
  explicit DeviceKv(const KvBuffers& b)
      : k(b.k),
        v(b.v),
        k_cache(b.k_cache),
        v_cache(b.v_cache),
        k_scales(b.k_scales),
        v_scales(b.v_scales),
        slots(bytes_of(b.args().slot_mapping)),
        k_mean(b.k_mean),
        invalid(std::vector<int32_t>{0}) {
    const KvWriteArgs h = b.args();
    a = h;
    a.k = on_device(h.k, k);
    a.v = on_device(h.v, v);
    a.k_cache = on_device(h.k_cache, k_cache);
    a.v_cache = on_device(h.v_cache, v_cache);
    if (h.k_scales.given()) a.k_scales = on_device(h.k_scales, k_scales);
    if (h.v_scales.given()) a.v_scales = on_device(h.v_scales, v_scales);
    a.slot_mapping = on_device(h.slot_mapping, slots);
    if (h.k_mean.given()) a.k_mean = on_device(h.k_mean, k_mean);
    a.invalid_slots = make_view(invalid.data(), DType::i32, {1});
  }
  DeviceBytes k, v, k_cache, v_cache, k_scales, v_scales, slots, k_mean, invalid;
  KvWriteArgs a;
};

TEST(CudaWriteKv, EqualsTheHostWrite) {
  for (uint64_t seed = 1; seed <= 80; ++seed) {
    const KvCase c = random_kv_case(seed);
    SCOPED_TRACE(c.describe());
    KvBuffers host(c);
    DeviceKv dev(host);
    ASSERT_TRUE(write_kv(host.args()).is_ok());
    const Status st = write_kv(dev.a);
    ASSERT_TRUE(st.is_ok()) << st.message();
    check(cudaDeviceSynchronize(), "write_kv");
    EXPECT_EQ(dev.k_cache.download(), host.k_cache);
    EXPECT_EQ(dev.v_cache.download(), host.v_cache);
    EXPECT_EQ(dev.k_scales.download(), host.k_scales);
    EXPECT_EQ(dev.v_scales.download(), host.v_scales);
    EXPECT_EQ(dev.invalid.download(), std::vector<uint8_t>(4, 0));
  }
}

// Slots the run cannot check before it reads them: those past the caches are skipped and counted,
// the others written as the host writes them.
TEST(CudaWriteKv, SlotsPastTheCachesAreSkippedAndCounted) {
  KvCase c;
  c.tokens = 10;
  c.k_type = DType::e2m1;
  c.v_type = DType::bf16;
  KvBuffers host(c);
  KvBuffers bad(c);
  bad.slots[1] = 5 * 16;
  bad.slots[6] = int64_t(1) << 40;
  DeviceKv dev(bad);
  ASSERT_TRUE(write_kv(dev.a).is_ok());
  check(cudaDeviceSynchronize(), "write_kv");
  host.slots[1] = host.slots[6] = -1;
  ASSERT_TRUE(write_kv(host.args()).is_ok());
  EXPECT_EQ(dev.k_cache.download(), host.k_cache);
  EXPECT_EQ(dev.v_cache.download(), host.v_cache);
  EXPECT_EQ(dev.k_scales.download(), host.k_scales);
  const std::vector<uint8_t> count = dev.invalid.download();
  int32_t invalid = 0;
  std::memcpy(&invalid, count.data(), 4);
  EXPECT_EQ(invalid, 2);
}

// One write captured in a CUDA graph, replayed over new tokens and new slots in the same buffers.
TEST(CudaWriteKv, GraphReplaysWithNewTokensAndSlots) {
  KvCase c;
  c.tokens = 12;
  c.heads = 3;
  c.k_type = DType::e4m3;
  c.v_type = DType::e2m3;
  c.rotate_k = true;
  c.k_mean = true;
  KvBuffers first(c);
  DeviceKv dev(first);
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  RunOptions options;
  options.stream = stream;
  const Status st = write_kv(dev.a, options);
  check(cudaStreamEndCapture(stream, &graph), "capture");
  ASSERT_TRUE(st.is_ok()) << st.message();
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  KvBuffers host(c);  // the host's caches across the steps
  for (uint64_t step = 0; step < 6; ++step) {
    KvCase next = c;
    next.seed = 100 + step;
    const KvBuffers tokens(next);  // new tokens and slots, same shapes
    dev.k.upload(tokens.k);
    dev.v.upload(tokens.v);
    dev.slots.upload(bytes_of(tokens.args().slot_mapping));
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaStreamSynchronize(stream), "replay");
    host.k = tokens.k;
    host.v = tokens.v;
    host.slots = tokens.slots;
    host.slots32 = tokens.slots32;
    ASSERT_TRUE(write_kv(host.args()).is_ok());
    EXPECT_EQ(dev.k_cache.download(), host.k_cache) << "step " << step;
    EXPECT_EQ(dev.v_cache.download(), host.v_cache) << "step " << step;
    EXPECT_EQ(dev.k_scales.download(), host.k_scales) << "step " << step;
    EXPECT_EQ(dev.v_scales.download(), host.v_scales) << "step " << step;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Decode over a paged MXFP8 cache the GPU wrote gives the bits of decode over the cache the host
// wrote.
TEST(CudaWriteKv, DecodeOverTheWrittenCacheEqualsTheHostWritten) {
  KvCase c;
  c.pages = 8;
  c.page_size = 16;
  c.heads = 2;
  c.dim_k = c.dim_v = 128;
  c.tokens = 100;
  c.k_type = c.v_type = DType::e4m3;
  c.src_type = DType::bf16;
  KvBuffers host(c);
  for (int64_t t = 0; t < c.tokens; ++t) host.slots[size_t(t)] = host.slots32[size_t(t)] = t;
  DeviceKv dev(host);
  ASSERT_TRUE(write_kv(host.args()).is_ok());
  ASSERT_TRUE(write_kv(dev.a).is_ok());
  check(cudaDeviceSynchronize(), "write_kv");
  DeviceKv host_written(host);  // the host's caches, uploaded
  const auto decode = [&](const KvWriteArgs& caches) {
    std::vector<uint8_t> q_bytes = stress_values(DType::bf16, 8 * 128, 7);
    DeviceBytes q(q_bytes), o(std::vector<uint8_t>(8 * 128 * 4, 0));
    std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6}, lens = {100};
    AttentionArgs a;
    a.q = make_view(q.data(), DType::bf16, {1, 1, 8, 128});
    a.k = caches.k_cache;
    a.v = caches.v_cache;
    a.k_scales = caches.k_scales;
    a.v_scales = caches.v_scales;
    a.o = make_view(o.data(), DType::f32, {1, 1, 8, 128});
    a.paged.page_size = 16;
    a.paged.block_table = make_view(table.data(), DType::i32, {1, 7});
    a.kv_len = make_view(lens.data(), DType::i32, {1});
    a.split.split_kv = 0;
    cuda::DecodePlan plan;
    Status st = cuda::plan_decode(a, &plan);
    EXPECT_TRUE(st.is_ok()) << st.message();
    st = cuda::run_decode(plan, a, nullptr);
    EXPECT_TRUE(st.is_ok()) << st.message();
    check(cudaDeviceSynchronize(), "decode");
    return o.download();
  };
  EXPECT_EQ(decode(dev.a), decode(host_written.a));
}

}  // namespace
}  // namespace mxattn::test
