// The scratch of the AMX few-row kernel (RowTileStep, attend_rows_bf16), owned: sized in one
// place for a step's largest key count, query rows and row widths, and handed to each step.
#pragma once

#include <cstdint>

#include "cpu/aligned.h"
#include "cpu/fast_kernels.h"

namespace mxattn::cpu {

class RowTileScratch {
 public:
  RowTileScratch() = default;  // none: for engines that do not run the kernel
  // For steps of up to `keys` keys, `rows` query rows and rows of dim_qk_padded and dim_v_padded
  // elements (multiples of 32).
  RowTileScratch(int64_t keys, int64_t rows, int64_t dim_qk_padded, int64_t dim_v_padded)
      : keys_padded_((keys + kGroup - 1) / kGroup * kGroup),
        key_rows_(zeroed<uint16_t>(keys_padded_ * dim_qk_padded)),
        value_rows_(zeroed<uint16_t>(keys_padded_ * dim_v_padded)),
        scores_(zeroed<float>(rows * keys_padded_)),
        score_tiles_(zeroed<float>(keys_padded_ * kGroup)),
        weight_tiles_(zeroed<uint32_t>(keys_padded_ * kGroup)),
        products_(zeroed<float>(4 * kGroup * kGroup)),
        row_state_(zeroed<float>(3 * rows)) {}

  // Points the step's scratch fields (keys_padded through row_state) here.
  void attach(RowTileStep& step) const {
    step.keys_padded = keys_padded_;
    step.key_rows = key_rows_.get();
    step.value_rows = value_rows_.get();
    step.scores = scores_.get();
    step.ld = keys_padded_;
    step.score_tiles = score_tiles_.get();
    step.weight_tiles = weight_tiles_.get();
    step.products = products_.get();
    step.row_state = row_state_.get();
  }

  int64_t keys_padded() const { return keys_padded_; }
  // The kernel's bf16 copies of FP8 K and V rows, keys_padded() rows each.
  const uint16_t* key_rows() const { return key_rows_.get(); }
  const uint16_t* value_rows() const { return value_rows_.get(); }

 private:
  static constexpr int64_t kGroup = 16;  // keys a tile of the kernel
  int64_t keys_padded_ = 0;
  Aligned<uint16_t> key_rows_, value_rows_;
  Aligned<float> scores_, score_tiles_;
  Aligned<uint32_t> weight_tiles_;
  Aligned<float> products_, row_state_;
};

}  // namespace mxattn::cpu
