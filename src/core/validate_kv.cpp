// Argument checking of cache writes (spec §7, §11): every argument before anything is written,
// and a host-readable slot mapping slot by slot.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/index.h"
#include "core/checks.h"
#include "core/validate.h"

namespace mxattn::core {
namespace {

constexpr DTypeSet kCacheTypes{bit(DType::bf16) | bit(DType::f16) | kMxBits,
                               "bf16, f16 or an MX element type (e4m3, e5m2, e2m3, e3m2, e2m1)"};
constexpr DTypeSet kSlotTypes{bit(DType::i32) | bit(DType::i64), "i32 or i64"};

// One cache and its scales: [pages, page_size, Hkv, D] with a contiguous head dim, MX caches with
// E8M0 scales [pages, page_size, Hkv, D / 32] (contiguous last axis), 16-bit ones without.
Status check_cache(std::string_view name, std::string_view scales_name, const TensorView& cache,
                   const TensorView& scales, int64_t pages, int64_t page_size, int64_t heads,
                   int64_t dim) {
  if (Status st = check_view(name, cache, kCacheTypes,
                             shape("[pages, page_size, Hkv, D]", {pages, page_size, heads, dim}));
      !st) {
    return st;
  }
  if (dim > 1 && cache.stride[3] != 1) {
    return invalid(name, " needs a contiguous head dim (stride 1), found strides ",
                   base::strides_string(cache));
  }
  if (!is_mx(cache.dtype)) {
    if (scales.given()) {
      return invalid(scales_name, " is given, but ", name, " is ", name_of(cache.dtype),
                     ", which has no scales");
    }
    return Status::ok();
  }
  if (dim % kMxBlock != 0) {
    return invalid(name, " is ", name_of(cache.dtype),
                   ", quantized in blocks of 32 along the head ",
                   "dim: D must be a multiple of 32, found ", dim);
  }
  if (Status st = check_view(
          scales_name, scales, kE8m0,
          shape("[pages, page_size, Hkv, D / 32]", {pages, page_size, heads, dim / kMxBlock}));
      !st) {
    return st;
  }
  if (dim / kMxBlock > 1 && scales.stride[3] != 1) {
    return invalid(scales_name, " needs a contiguous last axis (stride 1), found strides ",
                   base::strides_string(scales));
  }
  return Status::ok();
}

int64_t slot_at(const TensorView& slots, int64_t t) {
  const int64_t i = base::offset_of(slots, t);
  return slots.dtype == DType::i64 ? static_cast<const int64_t*>(slots.data)[i]
                                   : static_cast<const int32_t*>(slots.data)[i];
}

// Every slot of a host-readable mapping inside the caches, no slot named twice.
Status check_slots(const TensorView& slots, int64_t capacity) {
  const int64_t tokens = slots.shape[0];
  std::vector<std::pair<int64_t, int64_t>> used;  // (slot, token)
  used.reserve(size_t(tokens));
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t s = slot_at(slots, t);
    if (s < 0) continue;
    if (s >= capacity) {
      return invalid("slot_mapping[", t, "] = ", s,
                     " lies past the caches (pages * page_size = ", capacity, " slots)");
    }
    used.emplace_back(s, t);
  }
  std::sort(used.begin(), used.end());
  for (size_t i = 1; i < used.size(); ++i) {
    if (used[i].first == used[i - 1].first) {
      return invalid("slot_mapping[", used[i - 1].second, "] and slot_mapping[", used[i].second,
                     "] both name slot ", used[i].first);
    }
  }
  return Status::ok();
}

}  // namespace

Status validate_write_kv(const KvWriteArgs& a, bool slots_readable) {
  if (Status st = check_given_rank("k", a.k, 3, "[T, Hkv, Dqk]"); !st) return st;
  if (Status st = check_given_rank("v", a.v, 3, "[T, Hkv, Dv]"); !st) return st;
  const int64_t tokens = a.k.shape[0], heads = a.k.shape[1], dim_qk = a.k.shape[2];
  const int64_t dim_v = a.v.shape[2];
  if (Status st =
          check_view("k", a.k, kPlainFloat, shape("[T, Hkv, Dqk]", {tokens, heads, dim_qk}));
      !st) {
    return st;
  }
  if (Status st = check_view("v", a.v, kPlainFloat, shape("[T, Hkv, Dv]", {tokens, heads, dim_v}));
      !st) {
    return st;
  }
  if (Status st = check_given_rank("k_cache", a.k_cache, 4, "[pages, page_size, Hkv, Dqk]"); !st) {
    return st;
  }
  const int64_t pages = a.k_cache.shape[0], page_size = a.k_cache.shape[1];
  if (pages < 0 || page_size <= 0) {
    return invalid("k_cache must have pages >= 0 and page_size >= 1, found shape ",
                   a.k_cache.shape_string());
  }
  if (Status st = check_cache("k_cache", "k_scales", a.k_cache, a.k_scales, pages, page_size, heads,
                              dim_qk);
      !st) {
    return st;
  }
  if (a.v_scale_axis != VScaleAxis::head_dim) {
    return invalid("v_scale_axis: write_kv appends V along the head dim only; with V scales ",
                   "along the keys a block's scale depends on keys not yet written");
  }
  if (Status st =
          check_cache("v_cache", "v_scales", a.v_cache, a.v_scales, pages, page_size, heads, dim_v);
      !st) {
    return st;
  }
  if (Status st = check_view("slot_mapping", a.slot_mapping, kSlotTypes, shape("[T]", {tokens}));
      !st) {
    return st;
  }
  if (Status st =
          check_optional_view("k_mean", a.k_mean, kF32, shape("[Hkv, Dqk]", {heads, dim_qk}));
      !st) {
    return st;
  }
  if (a.rotate_k && (dim_qk <= 0 || (dim_qk & (dim_qk - 1)) != 0)) {
    return invalid("rotate_k: the Hadamard rotation needs Dqk a power of two, found ", dim_qk);
  }
  if (Status st = check_optional_view("invalid_slots", a.invalid_slots, kI32, shape("[1]", {1}));
      !st) {
    return st;
  }
  int64_t capacity = 0;
  if (__builtin_mul_overflow(pages, page_size, &capacity)) {
    return invalid("k_cache: pages * page_size overflows 64-bit sizes");
  }
  return slots_readable ? check_slots(a.slot_mapping, capacity) : Status::ok();
}

}  // namespace mxattn::core
