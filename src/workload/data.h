// The logical values of a problem, drawn from its spec's seed: Q, K, V (and a random k_mean) as
// f32 in BSHD order before any transform or rounding, and the integer metadata (block table,
// sparse layout). A test may change them (repeat KV heads, cut a sequence out) and build the
// problem on the changed copy.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "mxattn/status.h"
#include "mxattn/tensor.h"
#include "workload/spec.h"

namespace mxattn::workload {

struct Data {
  std::vector<float> q;       // [B, Sq, Hq, Dqk]
  std::vector<float> k;       // [B, Sk, Hkv, Dqk], zero past kv_len
  std::vector<float> v;       // [B, Sk, Hkv, Dv], zero past kv_len
  std::vector<float> k_mean;  // [B, Hkv, Dqk], with Spec::k_mean
  int64_t num_pages = 0;
  std::vector<int32_t> block_table;  // [B, max_pages]
  // The block-sparse layout: row_ptr [Bx, Hx, query blocks + 1] and col_idx [Bx, Hx, nnz_max],
  // Bx 1 or B, Hx 1 or Hq (a given layout may differ, for the library to refuse).
  std::array<int64_t, 3> row_ptr_shape{};
  std::array<int64_t, 3> col_idx_shape{};
  std::vector<int32_t> row_ptr;
  std::vector<int32_t> col_idx;
};

// Checks what the generator itself needs of a spec (sizes, per-batch lists, kv_len within
// [0, seq_k], paging with V scales along the keys): the library validates the rest.
Status check_spec(const Spec& spec);

// The values of `spec`, which must pass check_spec: N(0, 1) values that depend only on the seed and
// the element's index (not on the thread count or the other sizes' draws), the block table a
// shuffle of the pool's pages, the sparse layout drawn as the spec says.
Data generate(const Spec& spec);

// Given inputs instead of random ones: f32, f16 or bf16, contiguous BSHD of the spec's shapes; and
// a given block-sparse layout (spec §6: int32 row_ptr [Bx, Hx, query blocks + 1] and col_idx
// [Bx, Hx, nnz_max], blocks of the spec's block_q x block_k), which the library validates like any
// other.
struct Inputs {
  const TensorView* q = nullptr;
  const TensorView* k = nullptr;
  const TensorView* v = nullptr;
  const TensorView* row_ptr = nullptr;
  const TensorView* col_idx = nullptr;
};

// Replaces the drawn values of `data` by the given ones.
Status take_inputs(const Spec& spec, const Inputs& inputs, Data* data);

// A layout listing exactly `per_row` of the `k_blocks` key blocks (chosen by `rng`, ascending) for
// each of `rows` query blocks, appended to row_ptr (rows + 1 entries) and col_idx.
void draw_fixed_count_rows(std::mt19937_64& rng, int64_t rows, int64_t k_blocks, int64_t per_row,
                           std::vector<int32_t>* row_ptr, std::vector<int32_t>* col_idx);

}  // namespace mxattn::workload
