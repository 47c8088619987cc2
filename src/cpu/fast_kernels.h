// The SIMD kernels of the fast CPU engine, one set per instruction set, chosen at run time.
//
// The kernel translation units (src/cpu/simd/*.cpp) are compiled with their own ISA flags, so they
// include nothing with inline functions but system headers and this file (plain data and
// declarations only): an inline function compiled there with AVX-512 could be the copy the linker
// keeps for the baseline code.
#pragma once

#include <cstdint>

namespace mxattn::cpu {

// avx512_vbmi: AVX-512 with the VBMI byte permutes (Ice Lake and later, Zen 4), which add the
// few-row kernels that read bf16 and FP8 rows directly. avx512_bf16: those plus the AVX512-BF16
// dot products (Zen 4, Sapphire Rapids and later), which add the few-row scores of bf16 queries.
// avx512_amx: those plus the AMX tile unit (Sapphire Rapids and later), which adds the many-row
// kernels for f32, f16 and bf16 Q, K and V.
//
// avx512_amx_emulated: the avx512_amx set with the tile unit emulated in AVX-512 (slowly), for
// the tests on CPUs with AVX512-BF16; never chosen to run a problem.
enum class SimdIsa : uint8_t {
  portable,
  avx2,
  avx512,
  avx512_vbmi,
  avx512_bf16,
  avx512_amx,
  avx512_amx_emulated,
};

// How the elements of a K or V row are stored.
enum class RowElem : uint8_t {
  f32,
  f16,
  bf16,
  e4m3,
  e5m2,
  fp6,  // E2M3 or E3M2, four codes in three bytes
  fp4,  // E2M1, two codes a byte
};

// What the rows of one K or V tile share.
struct RowFormat {
  RowElem elem = RowElem::f32;
  int64_t width = 0;        // elements per row
  int64_t elem_stride = 1;  // plain types: elements between consecutive values (MX rows are packed)
  // MX: element d has the E8M0 scale scales[(d / scale_span) * scale_step] of its row: span 32 for
  // blocks along the row, 1 for V blocks along the keys (one scale per element).
  int64_t scale_span = 32;
  int64_t scale_step = 1;
  const float* scale_values = nullptr;  // 256 entries: E8M0 byte -> 2^(e - 127), NaN for 0xFF
  // FP6 and FP4: code -> value (64 or 16 entries).
  const float* code_values = nullptr;
  // FP8: the bf16 of each code magnitude 0..127 (exact), as two byte tables: [0, 128) the low
  // bytes, [128, 256) the high bytes; the sign bit is the code's own (for the direct kernels).
  const uint8_t* code_bf16_bytes = nullptr;
};

// One row of a tile: its first element and, for MX, the scale byte of its first block.
struct RowSource {
  const uint8_t* data = nullptr;
  const uint8_t* scales = nullptr;
};

// Fetches every 64-byte line of [data, data + bytes) towards the caches, each once; Locality is
// __builtin_prefetch's (3: into L1, 2: into L2). Inlined: GCC deems a function of prefetches
// alone pure and drops the calls.
template <int Locality>
[[gnu::always_inline]] inline void prefetch_lines(const void* data, int64_t bytes) {
  const uintptr_t last = uintptr_t(data) + uintptr_t(bytes) - 1;
  for (uintptr_t at = uintptr_t(data) & ~uintptr_t(63); at <= last; at += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(at), 0, Locality);
  }
}

// The rows of a kernel that reads K or V rows where they lie: key k at rows[k * step], k < count;
// and rows some later call will read (next[k], k < next_count), which it fetches into the cache
// along the way, about one per key, so that memory is read ahead of its use and in its own order.
struct RowStream {
  const RowSource* rows = nullptr;
  int64_t count = 0;
  int64_t step = 1;
  const RowSource* next = nullptr;
  int64_t next_count = 0;
};

// The AMX kernels take f32 and f16 operands as sums of bf16 parts: part 0 is the value truncated
// to bf16, each next part the rest truncated again (the last one rounded), so part i is within
// 2^(-8 i) of the value. f32 is exactly the sum of 3 parts, f16 of 2, bf16 is 1; the softmax
// weights are split into 2 parts against bf16 values (16 bits of each weight) and 3 against f32
// and f16 values, but no more than the output needs: 1 for a bf16 O, 2 for an f16 one (the
// engine's weight_parts). A product of two operands is the sum of the products of parts i and j
// with i + j <= 2 (kBf16PartLevels): those left out are below 2^-24 of it, f32's rounding.
constexpr int kMaxBf16Parts = 3;
constexpr int kBf16PartLevels = 2;

// One key tile of the AMX kernels for packed query rows [0, row_count). Keys and values come in
// the layouts of pack_bf16_keys and pack_bf16_values, one array per part; dims and key counts are
// padded to 32 (one 64-byte tile row of bf16) with zeros.
struct Bf16TileStep {
  // The parts of Q, bf16 [row_count][q_stride] each, Q as given (not scaled).
  const uint16_t* q[kMaxBf16Parts] = {};
  int q_parts = 1;
  int64_t q_stride = 0;
  int64_t row_count = 0;  // a multiple of 16
  const uint32_t* keys[kMaxBf16Parts] = {};
  int key_parts = 1;
  const uint32_t* values[kMaxBf16Parts] = {};
  int value_parts = 1;
  int64_t key_count = 0;
  int64_t keys_padded = 0;  // the row stride of `keys` (in bf16 pairs) and of the scratch below
  int64_t dim_qk_padded = 0;
  int64_t dim_v_padded = 0;
  // scale * log2(e), at least 0 (Q comes negated for a negative scale): the softmax works in log2
  // units.
  float score_scale = 1;
  // As in softmax_step: key k of row r is masked out when k < first[r] or k > last[r]; null: none.
  const float* first = nullptr;
  const float* last = nullptr;
  float* row_max = nullptr;
  float* row_sum = nullptr;
  float* rescale = nullptr;
  float* out = nullptr;  // f32 [row_count][out_stride], dim_v_padded columns
  int64_t out_stride = 0;
  // Scratch of 32 rows x keys_padded: f32 scores, and the weights as weight_parts bf16 parts, so
  // that the products with V keep f32 accuracy.
  float* scores = nullptr;
  uint16_t* weights[kMaxBf16Parts] = {};
  int weight_parts = 2;
};

// One key tile of the AMX few-row kernel (decode) for one head: `rows` query rows against
// keys.count keys. S^T = K Q^T takes each group of 16 K rows as the tile unit's A operand, so K
// needs no transpose: bf16 rows where they lie when the group's rows are evenly spaced and the
// width a multiple of 32 (else copied), FP8 rows decoded to bf16 first with the E8M0 scale added
// to the exponent (exact for every finite code under a scale byte 17..239; a tile with another
// scale or a NaN or Inf code is declined). P V takes 16 V rows the same way as the B operand,
// against weights laid out with each key's weight in the even slot of a bf16 pair for the even
// output columns and in the odd slot for the odd ones, so V needs no interleave either.
struct RowTileStep {
  const RowFormat* key_format = nullptr;
  const RowFormat* value_format = nullptr;
  RowStream keys, values;
  // Rows are taken row_block at a time (row_block * q_parts <= 16, row_block * weight_parts
  // <= 8). Q^T as B tiles, q_columns = row_block * q_parts columns a block of rows:
  // q_tiles[((b * chunks + c) * 16 + i) * q_columns + n] holds elements 32 c + 2 i and
  // 32 c + 2 i + 1 of part n % q_parts of row b * row_block + n / q_parts (bf16 parts, Q as
  // given; zero past the rows and the width), for c < chunks = dim_qk_padded / 32.
  const uint32_t* q_tiles = nullptr;
  int q_parts = 1;
  int weight_parts = 1;  // the weights as bf16 parts (Bf16TileStep)
  int64_t rows = 0;
  int64_t row_block = 0;
  int64_t dim_qk_padded = 0;  // multiples of 32, past the row widths zero in Q
  int64_t dim_v_padded = 0;
  float score_factor = 1;  // scale * log2(e): the scores times it are in log2 units
  // As in softmax_by_rows.
  const float* first = nullptr;
  const float* last = nullptr;
  float* row_max = nullptr;
  float* row_sum = nullptr;
  float* rescale = nullptr;
  float* out = nullptr;  // f32 [rows][out_stride], natural order, dim_v_padded columns
  int64_t out_stride = 0;
  // Scratch for keys_padded keys (a multiple of 16, at least keys.count): bf16 K rows
  // [keys_padded][dim_qk_padded] and V rows [keys_padded][dim_v_padded], scores [rows][ld]
  // (ld >= keys_padded), the score tiles [keys_padded][16] f32, the weight tiles
  // [keys_padded / 16][16][16], the products of 4 column blocks [4][16][16] f32, and the softmax
  // state (row_max, row_sum, rescale: 3 x rows f32) while FP8 V rows are still being decoded.
  int64_t keys_padded = 0;
  uint16_t* key_rows = nullptr;
  uint16_t* value_rows = nullptr;
  float* scores = nullptr;
  int64_t ld = 0;
  float* score_tiles = nullptr;
  uint32_t* weight_tiles = nullptr;
  float* products = nullptr;
  float* row_state = nullptr;
};

// The tile computation. Scores are in log2 units (Q is packed pre-multiplied by scale * log2(e)).
// `rows_padded` (the packed row count rounded up to 16) is the stride of the transposed score tile
// st[key * rows_padded + row]; `dim_padded` (rounded up to 16) the length of zero-padded rows.
struct FastKernels {
  SimdIsa isa = SimdIsa::portable;

  // dst[r * dst_stride + d] = value d of row r, for d < width; the padding is left as it is.
  void (*convert_rows)(const RowFormat& format, const RowSource* rows, int64_t count, float* dst,
                       int64_t dst_stride);

  // st[k * rows_padded + r] = dot(keys[k], q_t[:, r]) for r < row_count (a multiple of 16), q_t
  // [dim_padded x rows_padded]: for tiles with many query rows (one vector lane per row).
  void (*scores_by_row_lanes)(const float* keys, int64_t key_stride, int64_t key_count,
                              const float* q_t, int64_t rows_padded, int64_t row_count,
                              int64_t dim_padded, float* st);

  // st[k * rows_padded + r] = dot(keys[k], q[r]) for r < rows, q row-major with stride dim_padded:
  // for tiles with few query rows (decode), vectors along the head dim.
  void (*scores_by_dim_lanes)(const float* keys, int64_t key_stride, int64_t key_count,
                              const float* q, int64_t rows, int64_t dim_padded, float* st,
                              int64_t rows_padded);

  // Online softmax step over keys [0, key_count) of st for rows r < row_count (a multiple of 16):
  // masks key k of row r out when k < first[r] or k > last[r] (tile-local; both null: no mask),
  // updates the running maximum `row_max` and sum `row_sum`, writes the rescale factor of the old
  // state to `rescale` and replaces the scores by their weights exp2(s - max).
  void (*softmax_step)(float* st, int64_t rows_padded, int64_t row_count, int64_t key_count,
                       const float* first, const float* last, float* row_max, float* row_sum,
                       float* rescale);

  // out[r] = rescale[r] * out[r] + sum_k st[k * rows_padded + r] * values[k], r < rows, over
  // dim_padded columns.
  void (*accumulate_values)(const float* st, int64_t rows_padded, int64_t key_count,
                            const float* values, int64_t value_stride, int64_t dim_padded,
                            const float* rescale, int64_t rows, float* out, int64_t out_stride);

  // The few-row kernels below read K and V rows where they lie, so no f32 tile is written; null
  // in the sets without them. They take bf16, contiguous f16, E4M3 and E5M2 rows, MX blocks along
  // the row (scale_span 32), and work on blocks of 32 elements in "even/odd order": within each
  // block, the 16 even elements, then the 16 odd ones. Their score tile is by rows: s[r * ld + k].

  // Like scores_by_dim_lanes, into s by rows, with q [query_rows][q_stride] in even/odd order
  // (64-byte aligned, q_stride a multiple of 32, zero past the row's width; rows past
  // query_rows up to a multiple of 4 zero as well).
  void (*scores_from_rows)(const RowFormat& format, const RowStream& keys, const float* q,
                           int64_t q_stride, int64_t query_rows, float* s, int64_t ld);

  // Like scores_from_rows for bf16 query rows, as given (not multiplied by the score scale):
  // s[r * ld + k] = factor * dot(keys[k], q[r]), with q [query_rows][q_stride] bf16 in the
  // order bf16_dot_position (fast_rows.h) gives (64-byte aligned, q_stride a multiple of 128,
  // zero past the row's width; rows past query_rows up to a multiple of 4 zero as well). Takes
  // contiguous bf16 rows and E4M3 and E5M2 rows; null in the sets without AVX512-BF16.
  void (*scores_bf16_from_rows)(const RowFormat& format, const RowStream& keys, const uint16_t* q,
                                int64_t q_stride, int64_t query_rows, float factor, float* s,
                                int64_t ld);

  // Like softmax_step, for rows r < query_rows of s by rows.
  void (*softmax_by_rows)(float* s, int64_t ld, int64_t query_rows, int64_t key_count,
                          const float* first, const float* last, float* row_max, float* row_sum,
                          float* rescale);

  // Like accumulate_values, with the weights s by rows and the values read from their rows: the
  // first format.width columns of out, rounded up to a multiple of 32 (out_stride at least
  // that), natural order.
  void (*accumulate_from_rows)(const RowFormat& format, const RowStream& values, const float* s,
                               int64_t ld, const float* rescale, int64_t query_rows, float* out,
                               int64_t out_stride);

  // The many-row kernels of the AMX tile unit, for f32, f16 and bf16 rows (see Bf16TileStep);
  // null in the sets without them.

  // Keys rows[k * step], k < count, as the B operand of Q K^T, split into `parts` bf16 parts
  // (dst[i] the i-th): dst[i][(d / 2) * keys_padded + k] holds part i of elements d and d + 1 of
  // key k, for d < dim_padded and k < round_up(count, 32), zero past the row and past the last key.
  void (*pack_bf16_keys)(const RowFormat& format, const RowSource* rows, int64_t step,
                         int64_t count, int64_t keys_padded, int64_t dim_padded, int parts,
                         uint32_t* const* dst);

  // Values rows[k * step], k < count, as the B operand of P V, split likewise:
  // dst[i][(k / 2) * dim_padded + d] holds part i of element d of keys k and k + 1, for
  // k < round_up(count, 32), zero past the row and past the last key.
  void (*pack_bf16_values)(const RowFormat& format, const RowSource* rows, int64_t step,
                           int64_t count, int64_t dim_padded, int parts, uint32_t* const* dst);

  // Scores, online softmax step and weights times values of one key tile (see Bf16TileStep).
  void (*attend_bf16)(const Bf16TileStep& step);

  // Scores, online softmax step and weights times values of one few-row key tile on the tile unit
  // (see RowTileStep); false, with nothing changed, for a tile it declines. The tile unit stays
  // configured between calls: release_tiles gives it back. Null in the sets without the unit.
  bool (*attend_rows_bf16)(const RowTileStep& step);
  void (*release_tiles)();
};

// The kernel sets; each is defined in its own translation unit.
const FastKernels& fast_kernels_portable();
const FastKernels& fast_kernels_avx2();
const FastKernels& fast_kernels_avx512();
const FastKernels& fast_kernels_avx512_vbmi();
const FastKernels& fast_kernels_avx512_bf16();
const FastKernels& fast_kernels_avx512_amx();
const FastKernels& fast_kernels_avx512_amx_emulated();

// FP6 and FP4 rows for every kernel set's convert_rows: unpacked code by code with the shared
// codecs (built with the portable set, where they may be included).
void convert_packed_rows(const RowFormat& format, const RowSource* rows, int64_t count, float* dst,
                         int64_t dst_stride);

}  // namespace mxattn::cpu
