#include "dist/cases.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "mxattn/mx.h"

namespace mxattn::test {
namespace {

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  return *(values.begin() + rng() % values.size());
}

// `total` cut into `ranks` contiguous lengths (some may be 0), each but the last a multiple of
// `unit`.
std::vector<int64_t> random_lengths(std::mt19937_64& rng, int64_t total, int ranks, int64_t unit) {
  std::vector<int64_t> cuts = {0};
  for (int r = 1; r < ranks; ++r) {
    int64_t cut = int64_t(rng() % uint64_t(total + 1)) / unit * unit;
    cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(total);
  std::vector<int64_t> lengths;
  for (int r = 0; r < ranks; ++r) lengths.push_back(cuts[size_t(r) + 1] - cuts[size_t(r)]);
  return lengths;
}

}  // namespace

std::string Case::describe(const workload::Problem& w) const {
  std::ostringstream s;
  s << w.describe() << " | shards q";
  for (int64_t n : q_lengths) s << " " << n;
  s << ", kv";
  for (int64_t n : kv_lengths) s << " " << n;
  s << (engine == Engine::cpu_reference ? " | reference" : " | fast");
  if (quantization.q) s << " | Q sent as " << name_of(*quantization.q);
  if (quantization.k) s << " | K sent as " << name_of(*quantization.k);
  if (quantization.v) s << " | V sent as " << name_of(*quantization.v);
  return s.str();
}

Case random_case(uint64_t seed, int ranks) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  Case c;
  workload::Spec& w = c.spec;
  w.seed = seed;
  w.batch = pick<int64_t>(rng, {1, 2});
  w.heads_q = 12;
  w.heads_kv = pick<int64_t>(rng, {1, 2, 3, 4, 6, 12});
  w.seq_k = 1 + int64_t(rng() % 140);
  w.seq_q = rng() % 3 != 0 ? w.seq_k : 1 + int64_t(rng() % 70);
  w.dim_qk = pick<int64_t>(rng, {32, 64});
  w.dim_v = pick<int64_t>(rng, {32, 64});
  w.q_type = pick(rng, {DType::f32, DType::bf16, DType::f16, DType::e4m3, DType::e2m1});
  w.k_type = pick(rng, {DType::bf16, DType::e4m3, DType::e5m2, DType::e2m3, DType::e2m1});
  w.v_type = pick(rng, {DType::f16, DType::e4m3, DType::e3m2, DType::e2m3, DType::e2m1});
  w.o_type = pick(rng, {DType::f32, DType::bf16, DType::f16});
  const bool v_keys = is_mx(w.v_type) && rng() % 3 == 0;
  w.v_axis = v_keys ? VScaleAxis::keys : VScaleAxis::head_dim;
  w.scale_mode = pick(rng, {ScaleMode::floor, ScaleMode::rceil});
  w.causal = pick(rng, {Causal::none, Causal::top_left, Causal::bottom_right, Causal::prefix});
  if (w.causal == Causal::prefix) w.prefix_offset = {int32_t(rng() % 40)};
  if (rng() % 3 == 0) w.kv_len = {int32_t(rng() % uint64_t(w.seq_k + 1))};
  if (rng() % 4 == 0) w.window = int64_t(rng() % 50);
  w.lse = rng() % 4 != 0;
  if (rng() % 3 == 0) {
    w.sparse_density = 0.5;
    w.block_q = pick(rng, {16, 32, 64});
    w.block_k = pick(rng, {16, 32, 64});
  }
  w.split_kv = pick(rng, {0, 1, 3});
  w.hadamard = rng() % 4 == 0;
  w.smooth_k = rng() % 4 == 0;
  c.engine = rng() % 2 == 0 ? Engine::cpu_reference : Engine::cpu_fast;
  c.q_lengths = random_lengths(rng, w.seq_q, ranks, 1);
  // MX V scales along the keys travel as given only from shards that start on a block.
  c.kv_lengths = random_lengths(rng, w.seq_k, ranks, v_keys ? kMxBlock : 1);
  return c;
}

Case quantize_on_send_case(uint64_t seed, int ranks) {
  Case c = random_case(seed, ranks);
  std::mt19937_64 rng(seed);
  workload::Spec& w = c.spec;
  w.q_type = pick(rng, {DType::bf16, DType::f32});
  w.k_type = pick(rng, {DType::bf16, DType::f32});
  w.v_type = pick(rng, {DType::bf16, DType::f16});
  w.v_axis = rng() % 3 == 0 ? VScaleAxis::head_dim : VScaleAxis::keys;
  c.kv_lengths = random_lengths(rng, w.seq_k, ranks, 1);
  if (rng() % 2 == 0) c.quantization.q = pick(rng, {DType::e4m3, DType::e2m3});
  c.quantization.k = pick(rng, {DType::e4m3, DType::e2m1});
  c.quantization.v = pick(rng, {DType::e4m3, DType::e5m2, DType::e3m2, DType::e2m1});
  c.quantization.mode = w.scale_mode;
  return c;
}

Case mx_v_along_keys_case(uint64_t seed, int ranks) {
  Case c = random_case(seed, ranks);
  std::mt19937_64 rng(seed);
  c.spec.v_type = pick(rng, {DType::e2m1, DType::e3m2});
  c.spec.v_axis = VScaleAxis::keys;
  c.kv_lengths = random_lengths(rng, c.spec.seq_k, ranks, kMxBlock);
  return c;
}

::testing::AssertionResult gathered_holds_whole_heads(const AttentionArgs& whole,
                                                      const AttentionArgs& gathered,
                                                      const dist::GatheredHeads& heads) {
  const int64_t B = whole.q.shape[0], Sq = whole.q.shape[1], Sk = whole.k.shape[1];
  // Row (b, s) of local head j is row (b, s) of global head `global(j)`.
  const auto same_heads = [&](const TensorView& w, const TensorView& local, int64_t rows,
                              auto global) {
    const int64_t unit = *contiguous_bytes(w.dtype, w.shape[3]);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < rows; ++s)
        for (int64_t j = 0; j < local.shape[2]; ++j) {
          const auto* want = static_cast<const std::byte*>(w.data) +
                             ((b * rows + s) * w.shape[2] + global(j)) * unit;
          const auto* got = static_cast<const std::byte*>(local.data) +
                            ((b * rows + s) * local.shape[2] + j) * unit;
          if (std::memcmp(want, got, size_t(unit)) != 0) return false;
        }
    return true;
  };
  const auto q_head = [&](int64_t i) { return heads.first_q_head() + i; };
  const auto kv_head = [&](int64_t j) { return heads.kv_head(j); };
  if (!same_heads(whole.q, gathered.q, Sq, q_head)) return ::testing::AssertionFailure() << "Q";
  if (!same_heads(whole.k, gathered.k, Sk, kv_head)) return ::testing::AssertionFailure() << "K";
  if (!same_heads(whole.v, gathered.v, Sk, kv_head)) return ::testing::AssertionFailure() << "V";
  if (whole.q_scales.given() && !same_heads(whole.q_scales, gathered.q_scales, Sq, q_head)) {
    return ::testing::AssertionFailure() << "Q scales";
  }
  if (whole.k_scales.given() && !same_heads(whole.k_scales, gathered.k_scales, Sk, kv_head)) {
    return ::testing::AssertionFailure() << "K scales";
  }
  if (!whole.v_scales.given()) return ::testing::AssertionSuccess();
  if (whole.v_scale_axis == VScaleAxis::head_dim) {
    return same_heads(whole.v_scales, gathered.v_scales, Sk, kv_head)
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << "V scales";
  }
  // V scales [B, Hkv, blocks, Dv]: exactly the logical size, and each local head's blocks.
  const int64_t blocks = (Sk + kMxBlock - 1) / kMxBlock, Dv = whole.v.shape[3];
  const int64_t local_kv = gathered.k.shape[2], heads_kv = whole.k.shape[2];
  if (gathered.v_scales.bytes != B * local_kv * blocks * Dv) {
    return ::testing::AssertionFailure()
           << "V scales hold " << gathered.v_scales.bytes << " bytes, not their logical "
           << B * local_kv * blocks * Dv;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < local_kv; ++j) {
      const auto* want = static_cast<const std::byte*>(whole.v_scales.data) +
                         (b * heads_kv + kv_head(j)) * blocks * Dv;
      const auto* got =
          static_cast<const std::byte*>(gathered.v_scales.data) + (b * local_kv + j) * blocks * Dv;
      if (std::memcmp(want, got, size_t(blocks * Dv)) != 0) {
        return ::testing::AssertionFailure() << "V scales of local KV head " << j;
      }
    }
  return ::testing::AssertionSuccess();
}

bool same_bytes(const TensorView& want, const TensorView& got) {
  return want.bytes == got.bytes && std::memcmp(want.data, got.data, size_t(want.bytes)) == 0;
}

Status quantize_whole(const AttentionArgs& plain, const Case& c, QuantizedWhole* out) {
  const dist::SendQuantization& sq = c.quantization;
  const VScaleAxis v_axis = c.spec.v_axis;
  out->plain = plain;
  out->plain.v_scale_axis = v_axis;
  out->args = out->plain;
  if (sq.q) {
    const TensorView& q = plain.q;
    out->q = base::HostTensor(*sq.q, {q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
    out->q_scales =
        base::HostTensor(DType::e8m0, {q.shape[0], q.shape[1], q.shape[2], q.shape[3] / kMxBlock});
    if (Status st = quantize(q, out->q.view(), out->q_scales.view(), 3, sq.mode); !st) return st;
    out->args.q = out->q.view();
    out->args.q_scales = out->q_scales.view();
  }
  const TensorView& k = plain.k;
  const TensorView& v = plain.v;
  const int64_t B = k.shape[0], Sk = k.shape[1], H = k.shape[2];
  out->k = base::HostTensor(*sq.k, {B, Sk, H, k.shape[3]});
  out->k_scales = base::HostTensor(DType::e8m0, {B, Sk, H, k.shape[3] / kMxBlock});
  if (Status st = quantize(k, out->k.view(), out->k_scales.view(), 3, sq.mode); !st) return st;
  out->v = base::HostTensor(*sq.v, {B, Sk, H, v.shape[3]});
  if (v_axis == VScaleAxis::keys) {
    out->v_scales =
        base::HostTensor(DType::e8m0, {B, H, (Sk + kMxBlock - 1) / kMxBlock, v.shape[3]});
    if (Status st =
            quantize(v, out->v.view(), permuted(out->v_scales.view(), {0, 2, 1, 3}), 1, sq.mode);
        !st) {
      return st;
    }
  } else {
    out->v_scales = base::HostTensor(DType::e8m0, {B, Sk, H, v.shape[3] / kMxBlock});
    if (Status st = quantize(v, out->v.view(), out->v_scales.view(), 3, sq.mode); !st) return st;
  }
  out->args.k = out->k.view();
  out->args.k_scales = out->k_scales.view();
  out->args.v = out->v.view();
  out->args.v_scales = out->v_scales.view();
  out->args.v_scale_axis = v_axis;
  return Status::ok();
}

}  // namespace mxattn::test
