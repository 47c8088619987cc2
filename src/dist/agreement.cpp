#include "dist/agreement.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>

#include "base/storage.h"
#include "core/validate.h"

namespace mxattn::dist {
namespace {

std::string shape_text(std::initializer_list<int64_t> shape) {
  std::string s = "[";
  for (const int64_t n : shape) s += (s.size() > 1 ? ", " : "") + std::to_string(n);
  return s + "]";
}

bool has_shape(const TensorView& v, std::initializer_list<int64_t> shape) {
  if (v.rank != int(shape.size())) return false;
  int i = 0;
  for (const int64_t n : shape) {
    if (v.shape[i++] != n) return false;
  }
  return true;
}

// The exchanges move whole rows of contiguous memory: every tensor that travels is contiguous, with
// exactly its logical shape, and backed.
Status check_travelling(const char* name, const TensorView& v,
                        std::initializer_list<int64_t> shape) {
  if (!has_shape(v, shape)) {
    return Status::invalid(std::string(name) + " must have shape " + shape_text(shape) +
                           ", found " + (v.given() ? v.shape_string() : "none"));
  }
  TensorView contiguous = v;
  set_contiguous_strides(contiguous);
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] > 1 && v.stride[i] != contiguous.stride[i]) {
      return Status::invalid(std::string(name) +
                             " must be contiguous (row-major) to travel in an all-to-all");
    }
  }
  return base::check_storage(name, v);
}

Status check_rank4(const char* name, const TensorView& v) {
  if (v.rank != 4) {
    return Status::invalid(std::string(name) + " must be given with rank 4, found " +
                           (v.given() ? "rank " + std::to_string(v.rank) : "none"));
  }
  return Status::ok();
}

// A stored tensor and its scales, or a plain tensor the sender quantizes.
struct Travelling {
  const char* name;
  const char* scales_name;
  const TensorView& data;
  const TensorView& scales;
  const std::optional<DType>& send_as;
  int64_t dim;  // the head dim
};

Status check_storage_type(const Travelling& t) {
  if (t.send_as) {
    if (!is_plain_float(t.data.dtype)) {
      return Status::invalid(std::string(t.name) + " is quantized before sending, so it must be " +
                             "f32, f16 or bf16, found " + std::string(name_of(t.data.dtype)));
    }
    if (!is_mx(*t.send_as)) {
      return Status::invalid(std::string(t.name) + " can be quantized before sending only to an " +
                             "MX element type, not " + std::string(name_of(*t.send_as)));
    }
    if (t.scales.given()) {
      return Status::invalid(std::string(t.scales_name) +
                             " must not be given: the sender quantizes " + t.name);
    }
  } else if (!is_plain_float(t.data.dtype) && !is_mx(t.data.dtype)) {
    return Status::invalid(std::string(t.name) + " must be f32, f16, bf16 or an MX element type, " +
                           "found " + std::string(name_of(t.data.dtype)));
  } else if (!is_mx(t.data.dtype) && t.scales.given()) {
    return Status::invalid(std::string(t.scales_name) + " are given but " + t.name + " is " +
                           std::string(name_of(t.data.dtype)) + ", not an MX type");
  }
  const DType wire = t.send_as ? *t.send_as : t.data.dtype;
  if (is_mx(wire) && t.dim % kMxBlock != 0) {
    return Status::invalid(std::string(t.name) + " in " + std::string(name_of(wire)) +
                           " needs a head dim that is a multiple of 32, found " +
                           std::to_string(t.dim));
  }
  if (t.dim % pack_group(wire) != 0) {
    return Status::invalid(std::string(t.name) + " in " + std::string(name_of(wire)) +
                           " needs a head dim that is a multiple of " +
                           std::to_string(pack_group(wire)) + " to travel head by head");
  }
  return Status::ok();
}

Status check_shard(const Communicator& comm, const AttentionArgs& a, const SendQuantization& sq) {
  for (auto [name, view] : {std::pair{"Q shard", &a.q}, std::pair{"K shard", &a.k},
                            std::pair{"V shard", &a.v}, std::pair{"O shard", &a.o}}) {
    if (Status st = check_rank4(name, *view); !st) return st;
  }
  if (a.paged.given()) {
    return Status::unsupported("sequence parallelism takes dense K/V shards, not a paged cache");
  }
  if (a.split.partial_o.given() || a.split.partial_lse.given() || a.split.counts.given()) {
    return Status::unsupported(
        "split partial outputs are not gathered across ranks: leave partial_o, partial_lse and "
        "counts empty");
  }
  const int64_t B = a.q.shape[0], Sq = a.q.shape[1], Hq = a.q.shape[2], Dqk = a.q.shape[3];
  const int64_t Sk = a.k.shape[1], Hkv = a.k.shape[2], Dv = a.v.shape[3];
  for (const int64_t n : {B, Sq, Hq, Dqk, Sk, Hkv, Dv}) {
    if (n < 0) return Status::invalid("shard sizes must be >= 0, found " + a.q.shape_string());
  }
  if (Hkv < 1 || Hq % Hkv != 0) {
    return Status::invalid("query heads (" + std::to_string(Hq) +
                           ") must be a multiple of the KV heads (" + std::to_string(Hkv) + ")");
  }
  if (Hq % comm.size() != 0) {
    return Status::invalid("query heads (" + std::to_string(Hq) + ") must be a multiple of the " +
                           std::to_string(comm.size()) + " ranks");
  }
  const Travelling travelling[] = {
      {"Q shard", "Q shard scales", a.q, a.q_scales, sq.q, Dqk},
      {"K shard", "K shard scales", a.k, a.k_scales, sq.k, Dqk},
      {"V shard", "V shard scales", a.v, a.v_scales, sq.v, Dv},
  };
  for (const Travelling& t : travelling) {
    if (Status st = check_storage_type(t); !st) return st;
  }
  if (!is_plain_float(a.o.dtype)) {
    return Status::invalid("O shard must be f32, f16 or bf16, found " +
                           std::string(name_of(a.o.dtype)));
  }
  if (Status st = check_travelling("Q shard", a.q, {B, Sq, Hq, Dqk}); !st) return st;
  if (Status st = check_travelling("K shard", a.k, {B, Sk, Hkv, Dqk}); !st) return st;
  if (Status st = check_travelling("V shard", a.v, {B, Sk, Hkv, Dv}); !st) return st;
  if (Status st = check_travelling("O shard", a.o, {B, Sq, Hq, Dv}); !st) return st;
  if (is_mx(a.q.dtype)) {
    if (Status st = check_travelling("Q shard scales", a.q_scales, {B, Sq, Hq, Dqk / kMxBlock});
        !st) {
      return st;
    }
  }
  if (is_mx(a.k.dtype)) {
    if (Status st = check_travelling("K shard scales", a.k_scales, {B, Sk, Hkv, Dqk / kMxBlock});
        !st) {
      return st;
    }
  }
  if (is_mx(a.v.dtype)) {
    const bool keys = a.v_scale_axis == VScaleAxis::keys;
    const Status st =
        keys ? check_travelling("V shard scales", a.v_scales,
                                {B, Hkv, (Sk + kMxBlock - 1) / kMxBlock, Dv})
             : check_travelling("V shard scales", a.v_scales, {B, Sk, Hkv, Dv / kMxBlock});
    if (!st) return st;
  }
  const std::pair<const char*, const TensorView*> scale_views[] = {{"Q shard scales", &a.q_scales},
                                                                   {"K shard scales", &a.k_scales},
                                                                   {"V shard scales", &a.v_scales}};
  for (auto [name, view] : scale_views) {
    if (view->given() && view->dtype != DType::e8m0) {
      return Status::invalid(std::string(name) + " must be e8m0, found " +
                             std::string(name_of(view->dtype)));
    }
  }
  if (a.lse.given()) {
    if (a.lse.dtype != DType::f32) return Status::invalid("LSE shard must be f32");
    if (Status st = check_travelling("LSE shard", a.lse, {B, Hq, Sq}); !st) return st;
  }
  if (a.k_mean.given()) {
    if (a.k_mean.dtype != DType::f32) return Status::invalid("k_mean must be f32");
    if (Status st = check_travelling("k_mean", a.k_mean, {B, Hkv, Dqk}); !st) return st;
  }
  return Status::ok();
}

// Names of the record fields every rank must agree on.
struct Field {
  const char* name;
  int64_t ShardRecord::*member;
};

constexpr Field kAgreedFields[] = {
    {"batch", &ShardRecord::batch},
    {"query heads", &ShardRecord::heads_q},
    {"KV heads", &ShardRecord::heads_kv},
    {"Dqk", &ShardRecord::dim_qk},
    {"Dv", &ShardRecord::dim_v},
    {"Q type on the wire", &ShardRecord::q_type},
    {"K type on the wire", &ShardRecord::k_type},
    {"V type on the wire", &ShardRecord::v_type},
    {"O type", &ShardRecord::o_type},
    {"Q quantized before sending", &ShardRecord::q_quantized},
    {"K quantized before sending", &ShardRecord::k_quantized},
    {"V quantized before sending", &ShardRecord::v_quantized},
    {"scale mode", &ShardRecord::scale_mode},
    {"V scale axis", &ShardRecord::v_axis},
    {"LSE given", &ShardRecord::lse},
    {"k_mean given", &ShardRecord::k_mean},
    {"sparse layout given", &ShardRecord::sparse},
    {"causal", &ShardRecord::causal},
    {"window", &ShardRecord::window},
    {"softmax scale", &ShardRecord::softmax_scale_bits},
    {"split_kv", &ShardRecord::split_kv},
    {"tile_m", &ShardRecord::tile_m},
    {"tile_n", &ShardRecord::tile_n},
    {"early_exit", &ShardRecord::early_exit},
};

// The first failing verdict of `count` records `stride_bytes` apart, each starting with its
// Verdict, as the error of every rank.
Status first_failure(const std::byte* base, size_t count, size_t stride_bytes) {
  for (size_t r = 0; r < count; ++r) {
    Verdict v;
    std::memcpy(&v, base + r * stride_bytes, sizeof(Verdict));
    if (v.code != int64_t(ErrorCode::ok)) {
      Status inner = v.status();
      const std::string message = "rank " + std::to_string(r) + ": " + inner.message();
      switch (inner.code()) {
        case ErrorCode::unsupported:
          return Status::unsupported(message);
        case ErrorCode::invalid_argument:
          return Status::invalid(message);
        default:
          return Status::runtime(message);
      }
    }
  }
  return Status::ok();
}

}  // namespace

Verdict Verdict::of(const Status& status) {
  Verdict v;
  v.code = int64_t(status.code());
  const std::string& m = status.message();
  std::memcpy(v.message, m.data(), std::min(m.size(), size_t(kVerdictChars - 1)));
  return v;
}

Status Verdict::status() const {
  const std::string m(message, strnlen(message, kVerdictChars));
  switch (ErrorCode(code)) {
    case ErrorCode::ok:
      return Status::ok();
    case ErrorCode::invalid_argument:
      return Status::invalid(m);
    case ErrorCode::unsupported:
      return Status::unsupported(m);
    default:
      return Status::runtime(m);
  }
}

ShardRecord describe_shard(const Communicator& comm, const AttentionArgs& shard,
                           const SendQuantization& sq, const Status& extra) {
  ShardRecord r;
  Status st = check_shard(comm, shard, sq);
  if (st && !extra) st = extra;
  r.verdict = Verdict::of(st);
  if (!st) return r;
  const AttentionArgs& a = shard;
  r.q_rows = a.q.shape[1];
  r.kv_rows = a.k.shape[1];
  r.batch = a.q.shape[0];
  r.heads_q = a.q.shape[2];
  r.heads_kv = a.k.shape[2];
  r.dim_qk = a.q.shape[3];
  r.dim_v = a.v.shape[3];
  r.q_type = int64_t(sq.q.value_or(a.q.dtype));
  r.k_type = int64_t(sq.k.value_or(a.k.dtype));
  r.v_type = int64_t(sq.v.value_or(a.v.dtype));
  r.o_type = int64_t(a.o.dtype);
  r.q_quantized = sq.q.has_value();
  r.k_quantized = sq.k.has_value();
  r.v_quantized = sq.v.has_value();
  r.scale_mode = sq.q || sq.k || sq.v ? int64_t(sq.mode) : 0;
  r.v_axis = is_mx(DType(r.v_type)) ? int64_t(a.v_scale_axis) : 0;
  r.lse = a.lse.given();
  r.k_mean = a.k_mean.given();
  r.sparse = a.sparse.given();
  r.causal = int64_t(a.causal);
  r.window = a.window < 0 ? -1 : a.window;
  r.softmax_scale_bits = a.scale ? int64_t(std::bit_cast<uint32_t>(*a.scale)) : -1;
  r.split_kv = a.split.split_kv;
  r.tile_m = a.split.tile_m;
  r.tile_n = a.split.tile_n;
  r.early_exit = a.split.early_exit;
  return r;
}

Status agree_on_shards(Communicator& comm, const ShardRecord& mine, Geometry* geometry) {
  const int ranks = comm.size();
  std::vector<ShardRecord> all(static_cast<size_t>(ranks));
  if (Status st = comm.all_gather(&mine, sizeof(ShardRecord), all.data()); !st) return st;
  static_assert(offsetof(ShardRecord, verdict) == 0);
  if (Status st = first_failure(reinterpret_cast<const std::byte*>(all.data()), all.size(),
                                sizeof(ShardRecord));
      !st) {
    return st;
  }
  for (int r = 1; r < ranks; ++r) {
    for (const Field& f : kAgreedFields) {
      const int64_t here = all[size_t(r)].*f.member, first = all[0].*f.member;
      if (here != first) {
        return Status::invalid("the ranks disagree on the " + std::string(f.name) + ": rank " +
                               std::to_string(r) + " has " + std::to_string(here) +
                               " but rank 0 has " + std::to_string(first));
      }
    }
  }
  Geometry g;
  g.ranks = ranks;
  g.rank = comm.rank();
  g.common = all[0];
  std::vector<int64_t> q_rows, kv_rows;
  for (const ShardRecord& r : all) {
    q_rows.push_back(r.q_rows);
    kv_rows.push_back(r.kv_rows);
  }
  g.q_shards = contiguous_shards(q_rows);
  g.kv_shards = contiguous_shards(kv_rows);
  if (g.v_along_keys() && !g.common.v_quantized) {
    for (int r = 0; r < ranks; ++r) {
      const Shard& s = g.kv_shards[size_t(r)];
      if (s.length > 0 && s.offset % kMxBlock != 0) {
        return Status::invalid(
            "V scales along the keys travel as given only when every key shard starts at a "
            "multiple of 32 keys, but rank " +
            std::to_string(r) + "'s starts at key " + std::to_string(s.offset) +
            ": make every shard but the last a multiple of 32 keys long, quantize V before "
            "sending (the ranks then agree on the scales of shared blocks), or block V along the "
            "head dim");
      }
    }
  }
  *geometry = std::move(g);
  return Status::ok();
}

Status agree_on(Communicator& comm, const Status& mine) {
  const Verdict v = Verdict::of(mine);
  std::vector<Verdict> all(size_t(comm.size()));
  if (Status st = comm.all_gather(&v, sizeof(Verdict), all.data()); !st) return st;
  return first_failure(reinterpret_cast<const std::byte*>(all.data()), all.size(), sizeof(Verdict));
}

}  // namespace mxattn::dist
