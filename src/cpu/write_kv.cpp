// Cache writes on the host (spec §11): every token's K and V rows, rotated, smoothed and quantized
// or rounded as the caches store them (mx/kv_rows.h), placed at their slots.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/index.h"
#include "cpu/engines.h"
#include "cpu/partials.h"
#include "mx/kv_rows.h"

namespace mxattn::cpu {
namespace {

int64_t slot_at(const TensorView& slots, int64_t t) {
  const int64_t i = base::offset_of(slots, t);
  return slots.dtype == DType::i64 ? static_cast<const int64_t*>(slots.data)[i]
                                   : static_cast<const int32_t*>(slots.data)[i];
}

// Token t's row of head h of `src` into the cache row at (page, offset, h).
void write_row(const TensorView& src, const TensorView& cache, const TensorView& scales, int64_t t,
               int64_t h, int64_t page, int64_t offset, bool rotate, const TensorView& mean,
               ScaleMode mode, std::vector<float>& row, std::vector<double>& scratch) {
  const int64_t dim = src.shape[2];
  const float* mean_row =
      mean.given() ? static_cast<const float*>(mean.data) + base::offset_of(mean, h, 0) : nullptr;
  mx::prepare_row(mx::element_address(src.data, src.dtype, base::offset_of(src, t, h, 0)),
                  src.dtype, src.stride[2], dim, rotate, mean_row,
                  mean.given() ? mean.stride[1] : 0, row.data(), scratch.data());
  uint8_t* cache_row =
      mx::element_address(cache.data, cache.dtype, base::offset_of(cache, page, offset, h, 0));
  uint8_t* scale_row = scales.given() ? static_cast<uint8_t*>(scales.data) +
                                            base::offset_of(scales, page, offset, h, 0)
                                      : nullptr;
  for (int64_t b = 0; b * kMxBlock < dim; ++b) {
    const int count = int(std::min<int64_t>(kMxBlock, dim - b * kMxBlock));
    mx::store_block(cache.dtype, cache_row, scale_row, b, row.data() + b * kMxBlock, count, mode);
  }
}

}  // namespace

void write_kv(const KvWriteArgs& a, int threads) {
  const int64_t tokens = a.k.shape[0], heads = a.k.shape[1];
  const int64_t page_size = a.k_cache.shape[1];
  const int64_t capacity = a.k_cache.shape[0] * page_size;
  const int64_t rows = tokens * heads;
  const int64_t widest = std::max(a.k.shape[2], a.v.shape[2]);
#pragma omp parallel num_threads(thread_count(threads))
  {
    std::vector<float> row(static_cast<size_t>(widest));
    std::vector<double> scratch(static_cast<size_t>(widest));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = r / heads, h = r % heads;
      const int64_t slot = slot_at(a.slot_mapping, t);
      if (slot < 0 || slot >= capacity) continue;  // validated: only skipped tokens
      const int64_t page = slot / page_size, offset = slot % page_size;
      write_row(a.k, a.k_cache, a.k_scales, t, h, page, offset, a.rotate_k, a.k_mean, a.mode, row,
                scratch);
      write_row(a.v, a.v_cache, a.v_scales, t, h, page, offset, false, TensorView{}, a.mode, row,
                scratch);
    }
  }
}

}  // namespace mxattn::cpu
