// The few-row kernel of the AMX set (decode): one key tile of one head on the tile unit
// (RowTileStep, fast_kernels.h).
//
// S^T = K Q^T: 16 K rows are the A operand as they lie (32 elements a row per instruction), Q^T
// the B operand (pairs of elements by column: the query rows, times their bf16 parts), so a
// decode key costs a fraction of a tile instruction and no transpose of K. P V: 16 V rows are the
// B operand as they lie, read as pairs of neighbouring columns; the A operand puts each key's
// weight in the even slot of its pair for one output row (the even columns) and in the odd slot
// for another (the odd columns), so V needs no interleave either. The scores come back by key
// and are transposed once for the softmax (softmax_by_rows, as the FMA kernels use).
//
// Tiles: 0 the scores (16 keys x the Q columns), 1-4 the products of 4 blocks of 32 output
// columns (2 rows a query row and weight part), 5 the weights, 6 16 K or V rows, 7 a block of
// Q^T. The configuration stays loaded between calls (release_tiles gives the unit back).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/fast_kernels.h"
#include "cpu/simd/amx_bf16.h"
#include "cpu/simd/rows_avx512_vbmi.h"

namespace mxattn::cpu::simd {
namespace {

TileConfig row_tile_config(int64_t q_columns, int64_t product_rows) {
  TileConfig c;
  c.rows[0] = 16;
  c.bytes_per_row[0] = uint16_t(4 * q_columns);
  for (int t = 1; t <= 5; ++t) {
    c.rows[t] = uint8_t(product_rows);
    c.bytes_per_row[t] = 64;
  }
  c.rows[6] = 16;
  c.bytes_per_row[6] = 64;
  c.rows[7] = 16;
  c.bytes_per_row[7] = uint16_t(4 * q_columns);
  return c;
}

// E8M0 scales whose product with every finite nonzero E4M3 or E5M2 value is a normal bf16
// (2^-16 * 2^(17 - 127) = 2^-126; 57344 * 2^(239 - 127) < 2^128): (e - 127) added to the
// exponent field of the decoded value is then exact.
constexpr int kMinSafeScale = 17, kMaxSafeScale = 239;

// Per scale byte e, the bf16 exponent offset (e - bias) << 7 in both words of a 32-bit entry (a
// broadcast of 32 bits from memory is a load alone; one of 16 bits, or from a general register,
// also takes the shuffle port, which the decode keeps busy), with bit 0 of each word set where e
// lies outside the safe range: the decode of such a tile is thrown away (the kernel declines it),
// and the flag tells it. Bias 127 for values decoded exactly (the byte tables), the format's own
// for the bit-move decode (Fp8Bits).
struct ExponentOffsets {
  alignas(64) uint32_t at[256];
};
constexpr ExponentOffsets exponent_offsets(int bias) {
  ExponentOffsets o{};
  for (int e = 0; e < 256; ++e) {
    const int unsafe = e < kMinSafeScale || e > kMaxSafeScale;
    o.at[e] = uint32_t(uint16_t((e - bias) * 128 + unsafe)) * 0x10001u;
  }
  return o;
}
constexpr ExponentOffsets kExponentOffsets = exponent_offsets(127);

// Bytes a row of format f spans (what prefetch_next fetches), from its reader.
int64_t row_bytes_of(const RowFormat& f) {
  int64_t bytes = 0;
  with_rows(f, [&](const auto& rows) { bytes = rows.row_bytes(); });
  return bytes;
}

// Fetches the rows of a stream's next tile into L2 a few at a time, spread over the kernel's
// steps: a core keeps only so many lines in flight, and a burst of fetches holds back the loads
// of the rows in use until the memory has answered the fetches before them.
class Fetcher {
 public:
  Fetcher(const RowStream& s, int64_t bytes) : s_(s), bytes_(bytes), k_(0) {}
  [[gnu::always_inline]] void rows(int64_t n) {
    for (const int64_t end = std::min(k_ + n, s_.next_count); k_ < end; ++k_) {
      prefetch_next(s_, k_, bytes_);
    }
  }
  void rest() { rows(s_.next_count); }

 private:
  const RowStream& s_;
  int64_t bytes_, k_;
};

// How an FP8 format decodes to bf16 by bit moves (GFNI affine maps, one instruction for 64
// codes). `low` and `high` give the low and high bytes of a normal code's bf16 word: its sign in
// bit 15, its exponent field in the low bits of the bf16 exponent, its mantissa right below. Read
// as bf16 that word is the code's value times 2^(bias - 127); adding (e - bias) << 7 multiplies it
// by 2^(127 - bias) and the block scale 2^(e - 127) (exact for safe scales). `check` maps every
// code that is not normal and finite (a zero or subnormal, which decode by tables, or a NaN or
// Inf) to a byte of at least `bad`, and every other code below it (its constant is 0xf0).
struct Fp8Bits {
  uint64_t low, high, check;
  uint8_t bad;
  int bias;
};

// A GFNI affine matrix from the source bits of each result bit: bit i of the result is the parity
// of the code's bits in from[i] (vgf2p8affineqb reads result bit i's mask from byte 7 - i).
constexpr uint64_t affine_matrix(const uint8_t (&from)[8]) {
  uint64_t m = 0;
  for (int i = 0; i < 8; ++i) m |= uint64_t(from[i]) << (8 * (7 - i));
  return m;
}

// E4M3 code bits: s = 7, exponent 6..3, mantissa 2..0. The check's top nibble is the exponent e
// mapped by L(e) = (e3 ^ e2, e2 ^ e1, e1 ^ e0, e0), complemented by the constant: 0xf only for
// e = 0, 0xe only for e = 15; its low nibble is (mantissa, s), so the bytes at least 0xee are the
// zeros and subnormals and the two NaNs (e = 15, mantissa 7).
constexpr Fp8Bits kE4m3Bits{affine_matrix({0, 0, 0, 0, 0x01, 0x02, 0x04, 0x08}),
                            affine_matrix({0x10, 0x20, 0x40, 0, 0, 0, 0, 0x80}),
                            affine_matrix({0x80, 0x01, 0x02, 0x04, 0x08, 0x18, 0x30, 0x60}), 0xee,
                            7};
// E5M2 code bits: s = 7, exponent 6..2, mantissa 1..0. The check's top nibble holds the XORs of
// neighbouring exponent bits, complemented: 0xf exactly for e = 0 and e = 31 (Inf and NaN).
constexpr Fp8Bits kE5m2Bits{affine_matrix({0, 0, 0, 0, 0, 0x01, 0x02, 0x04}),
                            affine_matrix({0x08, 0x10, 0x20, 0x40, 0, 0, 0, 0x80}),
                            affine_matrix({0, 0, 0, 0, 0x0c, 0x18, 0x30, 0x60}), 0xf0, 15};

constexpr ExponentOffsets kE4m3Offsets = exponent_offsets(kE4m3Bits.bias);
constexpr ExponentOffsets kE5m2Offsets = exponent_offsets(kE5m2Bits.bias);

// 64 FP8 codes c (32 where !two), any codes, as bf16 times the scales of bytes e0 and e1 into
// out, by the byte tables; returns `most` (Fp8Decoder::placed_to_bf16) with
// theirs. Out of line and by value, so that the caller's state stays in registers.
[[gnu::noinline]] __m512i fp8_by_tables(const uint8_t* code_bf16_bytes, __m512i c, uint32_t e0,
                                        uint32_t e1, bool two, uint16_t* out, __m512i most) {
  const Fp8Decoder decoder(code_bf16_bytes);
  const __m512i nonzero = _mm512_set1_epi16(0x7fff);
  // Table-decoded bf16 words times the scale of byte e, zeros left as they are.
  const auto scaled = [&](__m512i w, uint32_t e) {
    const __m512i offset = _mm512_set1_epi32(int32_t(kExponentOffsets.at[e]));
    return _mm512_mask_add_epi16(w, _mm512_test_epi16_mask(w, nonzero), w, offset);
  };
  __m512i w[2];
  decoder.placed_to_bf16(_mm512_permutexvar_epi8(_mm512_load_si512(kCodeOrder.at), c), w, most);
  _mm512_storeu_si512(out, scaled(w[0], e0));
  if (two) _mm512_storeu_si512(out + 32, scaled(w[1], e1));
  return most;
}

// A stream's FP8 rows (whole blocks of 32 along the row) decoded to bf16 times their block scales
// into scratch (`padded` elements a row, [0, width) written), a few rows at a time, so that the
// kernel decodes the rows of 16 keys while the tile unit multiplies those before. A row decodes
// first as if every code were normal and finite (nearly all are, in real data): 64 codes placed
// for the byte unpacks, the low and high bytes of their bf16 words by two GFNI bit moves (Fp8Bits),
// two unpacks and the scales' exponent offsets added, and a third bit move checks them. A row with
// a zero, subnormal, NaN or Inf code then decodes again by the byte tables (three shuffles and two
// permutes for 64 codes, the offset added where the value is not zero), whose largest magnitude
// finds NaN and Inf. Unsafe scales are found by a flag bit of their offsets. Both are kept until
// safe() is asked.
class Fp8Scratch {
 public:
  Fp8Scratch(const RowFormat& f, const RowStream& s, uint16_t* dst, int64_t padded)
      : f_(f), s_(s), dst_(dst), padded_(padded) {
    const Fp8Bits& bits = f.elem == RowElem::e4m3 ? kE4m3Bits : kE5m2Bits;
    offsets_ = f.elem == RowElem::e4m3 ? kE4m3Offsets.at : kE5m2Offsets.at;
    low_ = _mm512_set1_epi64(int64_t(bits.low));
    high_ = _mm512_set1_epi64(int64_t(bits.high));
    check_ = _mm512_set1_epi64(int64_t(bits.check));
    bad_ = _mm512_set1_epi8(char(bits.bad));
  }

  // Rows [begin, end): those of the stream decoded, those past its last key zero; one row of the
  // next tile fetched every two.
  [[gnu::always_inline]] void decode(int64_t begin, int64_t end, Fetcher& fetch) {
    const int64_t width = f_.width, step = f_.scale_step, last = std::min(end, s_.count);
    const uint32_t* offsets = offsets_;
    const RowSource* rows = s_.rows;
    const int64_t row_step = s_.step, padded = padded_;
    uint16_t* const dst = dst_;
    // The offsets' flags of these rows, in a register (the member lives in memory).
    __m512i flags = _mm512_setzero_si512();
    for (int64_t k = begin; k < last; ++k) {
      if (k % 2) fetch.rows(1);
      const RowSource& row = rows[k * row_step];
      uint16_t* out = dst + k * padded;
      __m512i checks = _mm512_setzero_si512();
      const uint8_t* scales = row.scales;
      int64_t d = 0;
      for (; d + 64 <= width; d += 64, scales += 2 * step) {
        checks = _mm512_max_epu8(
            checks, by_bits<true>(row.data + d, scales, step, offsets, out + d, flags));
      }
      if (d < width) {
        checks = _mm512_max_epu8(
            checks, by_bits<false>(row.data + d, scales, step, offsets, out + d, flags));
      }
      if (_mm512_cmpge_epu8_mask(checks, bad_)) [[unlikely]]
        by_tables(row, out);
    }
    flags_ = _mm512_or_si512(flags_, flags);
    if (last < end) {
      std::fill(dst + std::max(begin, last) * padded, dst + end * padded, uint16_t(0));
    }
  }

  // Whether every scale decoded so far is safe and every code finite (a table-decoded value whose
  // high byte is 0x7f is NaN or Inf).
  bool safe() const {
    return !_mm512_test_epi16_mask(flags_, _mm512_set1_epi16(1)) &&
           !_mm512_cmpge_epu8_mask(most_, _mm512_set1_epi8(0x7f));
  }

 private:
  // The 64 codes at `codes` (32 where !Two), of scale bytes scales[0] and scales[step], into `out`
  // as if every one were normal and finite, their offsets' flags OR-ed into `flags`; returns their
  // check bytes (Fp8Bits; zero past the codes). The caller keeps the pointers, the steps and the
  // flags in registers: read through the members (in memory, which the stores may alias) they
  // were reloaded, and the flags stored and loaded again, for every 64 codes or row.
  template <bool Two>
  [[gnu::always_inline]] __m512i by_bits(const uint8_t* codes, const uint8_t* scales, int64_t step,
                                         const uint32_t* offsets, uint16_t* out, __m512i& flags) {
    const __m512i c = load_codes<Two>(codes);
    const __m512i o0 = _mm512_set1_epi32(int32_t(offsets[scales[0]]));
    const __m512i o1 = Two ? _mm512_set1_epi32(int32_t(offsets[scales[step]])) : o0;
    flags = _mm512_ternarylogic_epi32(flags, o0, o1, 0xfe);
    const __m512i placed = _mm512_permutexvar_epi8(_mm512_load_si512(kCodeOrder.at), c);
    const __m512i low = _mm512_gf2p8affine_epi64_epi8(placed, low_, 0);
    const __m512i high = _mm512_gf2p8affine_epi64_epi8(placed, high_, 0);
    _mm512_storeu_si512(out, _mm512_add_epi16(_mm512_unpacklo_epi8(low, high), o0));
    if (!Two) return _mm512_maskz_gf2p8affine_epi64_epi8(0xffffffffu, c, check_, 0xf0);
    _mm512_storeu_si512(out + 32, _mm512_add_epi16(_mm512_unpackhi_epi8(low, high), o1));
    return _mm512_gf2p8affine_epi64_epi8(c, check_, 0xf0);
  }

  // A row again by the byte tables, where by_bits met a code that is not normal and finite.
  [[gnu::noinline]] void by_tables(const RowSource& row, uint16_t* out) {
    for (int64_t d = 0; d < f_.width; d += 64) {
      const bool two = f_.width - d >= 64;
      const __m512i c = two ? load_codes<true>(row.data + d) : load_codes<false>(row.data + d);
      const uint8_t* scales = row.scales + (d / 32) * f_.scale_step;
      most_ = fp8_by_tables(f_.code_bf16_bytes, c, scales[0], two ? scales[f_.scale_step] : 0, two,
                            out + d, most_);
    }
  }

  // 64 codes, or 32 and zeros where !Two.
  template <bool Two>
  [[gnu::always_inline]] static __m512i load_codes(const uint8_t* codes) {
    if (Two) return _mm512_loadu_si512(codes);
    return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  }

  const RowFormat& f_;
  const RowStream& s_;
  uint16_t* dst_;
  int64_t padded_;
  const uint32_t* offsets_;
  __m512i low_, high_, check_, bad_;
  __m512i flags_ = _mm512_setzero_si512();
  __m512i most_ = _mm512_setzero_si512();
};

// Where a tile operand of 16 rows reads from: the first row and the bytes between rows.
struct TileRows {
  const uint8_t* base;
  int64_t stride;
};

// Rows [k0, k0 + 16) of a stream as a tile operand, `padded` elements a row: the rows where they
// lie when they are bf16, evenly spaced, contiguous and whole blocks of 32; else bf16 copies in
// scratch (rows [k0, k0 + 16) of it, zero past the row and past the last key). `decoded`: the
// scratch holds every row already (FP8).
TileRows tile_rows(const RowFormat& f, const RowStream& s, int64_t k0, int64_t padded,
                   uint16_t* scratch, bool decoded) {
  uint16_t* copy = scratch + k0 * padded;
  const TileRows in_scratch{reinterpret_cast<const uint8_t*>(copy), padded * 2};
  if (decoded) return in_scratch;
  if (k0 + 16 <= s.count && f.elem_stride == 1 && f.width == padded) {
    const uint8_t* first = s.rows[k0 * s.step].data;
    const int64_t stride = s.rows[(k0 + 1) * s.step].data - first;
    bool even = true;
    for (int64_t i = 2; i < 16; ++i) even &= s.rows[(k0 + i) * s.step].data == first + i * stride;
    if (even) return {first, stride};
  }
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t k = k0 + i;
    for (int64_t d = 0; d < padded; d += kTileBf16) {
      _mm512_storeu_si512(copy + i * padded + d, k < s.count
                                                     ? load_16bit_32(f, s.rows[k * s.step], d)
                                                     : _mm512_setzero_si512());
    }
  }
  return in_scratch;
}

// Keys [k0, k0 + 16) of rows [0, rows) of the weights (scores by rows, zero past `count`) as tile
// 5's operand for a block of rb rows: row 2 (i rb + r) holds part i of row r's weight of key k in
// the even slot of pair k, row 2 (i rb + r) + 1 in the odd slot; rows past `rows` zero.
void weight_tile(const float* scores, int64_t ld, int64_t rows, int64_t rb, int parts, int64_t k0,
                 int64_t count, uint32_t* tile) {
  for (int64_t r = rows; r < rb; ++r) {
    for (int i = 0; i < parts; ++i) {
      _mm512_storeu_si512(tile + 2 * (i * rb + r) * 16, _mm512_setzero_si512());
      _mm512_storeu_si512(tile + (2 * (i * rb + r) + 1) * 16, _mm512_setzero_si512());
    }
  }
  const int64_t left = count - k0;
  const __mmask16 valid = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const __m512 x[2] = {_mm512_maskz_loadu_ps(valid, scores + r * ld + k0), _mm512_setzero_ps()};
    __m512i split[kMaxBf16Parts];
    split_parts(x, parts, split);
    for (int i = 0; i < parts; ++i) {
      const __m512i words = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(split[i]));
      uint32_t* even = tile + 2 * (i * rb + r) * 16;
      _mm512_storeu_si512(even, words);
      _mm512_storeu_si512(even + 16, _mm512_slli_epi32(words, 16));
    }
  }
}

// Block j of a 4-block pass of P V: 16 rows of columns [32 c, 32 c + 32) into tile 1 + j.
template <class Tiles, int J>
[[gnu::always_inline]] inline void product_block(const TileRows& v, int64_t c) {
  Tiles::template load<6>(v.base + c * 64, v.stride);
  Tiles::template dot_of<1 + J, 5, 6>();
}

template <class Tiles, int J>
[[gnu::always_inline]] inline void store_products(float* products) {
  Tiles::template store<1 + J>(products + J * 256, 64);
}

template <class Tiles>
bool attend_rows_bf16(const RowTileStep& s) {
  const RowFormat& kf = *s.key_format;
  const RowFormat& vf = *s.value_format;
  const int64_t count = s.keys.count;
  const int64_t used = (count + 15) / 16 * 16;
  const bool fp8_keys = kf.elem != RowElem::bf16, fp8_values = vf.elem != RowElem::bf16;
  const int64_t key_bytes = row_bytes_of(kf), value_bytes = row_bytes_of(vf);
  Fetcher fetch_keys(s.keys, key_bytes), fetch_values(s.values, value_bytes);
  // FP8 rows to bf16 16 keys at a time while the tile unit multiplies rows decoded before: K rows
  // and the first 32 V rows in the first pass of the scores below, the other V rows in the first
  // pass of P V, two groups ahead (spread over the step, as the FMA kernels read them). Each is
  // checked before the caller's state changes: K before the softmax, V before O, with the
  // softmax state held in scratch until then.
  Fp8Scratch key_decoder(kf, s.keys, s.key_rows, s.dim_qk_padded);
  Fp8Scratch value_decoder(vf, s.values, s.value_rows, s.dim_v_padded);
  constexpr int64_t kValuesAhead = 2 * 16;  // V rows decoded ahead of their tile loads
  const int64_t rb = s.row_block;
  const int64_t q_columns = rb * s.q_parts;
  const int64_t product_rows = 2 * rb * s.weight_parts;
  Tiles::configure(row_tile_config(q_columns, product_rows));

  // Scores by key, 16 keys and a block of rows at a time, then by row, the parts summed, in log2
  // units.
  const int64_t q_block = 16 * q_columns;
  const int64_t chunks = s.dim_qk_padded / kTileBf16;
  const __m512 factor = _mm512_set1_ps(s.score_factor);
  for (int64_t r0 = 0; r0 < s.rows; r0 += rb) {
    const uint32_t* q = s.q_tiles + (r0 / rb) * chunks * q_block;
    if (fp8_keys && r0 == 0) key_decoder.decode(0, std::min<int64_t>(16, used), fetch_keys);
    for (int64_t k0 = 0; k0 < used; k0 += 16) {
      const TileRows k = tile_rows(kf, s.keys, k0, s.dim_qk_padded, s.key_rows, fp8_keys);
      Tiles::template zero<0>();
      for (int64_t c = 0; c < chunks; ++c) {
        Tiles::template load<6>(k.base + c * 64, k.stride);
        Tiles::template load<7>(q + c * q_block, 4 * q_columns);
        Tiles::template dot_of<0, 6, 7>();
        fetch_keys.rows(1);
      }
      // The next 16 K rows while the tile unit multiplies (the tile loads of rows just stored
      // would wait for the stores), and the first 32 V rows; the others are decoded while it
      // multiplies the weights by V rows before them.
      if (fp8_keys && r0 == 0 && k0 + 16 < used) key_decoder.decode(k0 + 16, k0 + 32, fetch_keys);
      if (fp8_values && r0 == 0 && k0 < kValuesAhead) {
        value_decoder.decode(k0, k0 + 16, fetch_values);
      }
      if (q_columns == 4) {
        Tiles::template store<0>(s.score_tiles + k0 * 4, 16);
      } else {
        Tiles::template store<0>(s.score_tiles + k0 * 16, 64);
      }
      fetch_keys.rows(2);
    }
    const int64_t rows = std::min(rb, s.rows - r0);
    if (q_columns == 4) {
      // 16 keys of 4 columns in 4 vectors, lane 4 (k % 4) + n: column n of keys k0..k0 + 15 in
      // 3 permutes.
      alignas(64) static constexpr int32_t kPick[4][16] = {
          {0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0},
          {1, 5, 9, 13, 17, 21, 25, 29, 0, 0, 0, 0, 0, 0, 0, 0},
          {2, 6, 10, 14, 18, 22, 26, 30, 0, 0, 0, 0, 0, 0, 0, 0},
          {3, 7, 11, 15, 19, 23, 27, 31, 0, 0, 0, 0, 0, 0, 0, 0}};
      const __m512i halves =
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      for (int64_t k0 = 0; k0 < used; k0 += 16) {
        const float* st = s.score_tiles + k0 * 4;
        const __m512 a = _mm512_load_ps(st), b = _mm512_load_ps(st + 16);
        const __m512 c = _mm512_load_ps(st + 32), d = _mm512_load_ps(st + 48);
        fetch_keys.rows(2);
        __m512 column[4];
        for (int n = 0; n < 4; ++n) {
          const __m512i pick = _mm512_load_si512(kPick[n]);
          column[n] = _mm512_permutex2var_ps(_mm512_permutex2var_ps(a, pick, b), halves,
                                             _mm512_permutex2var_ps(c, pick, d));
        }
        for (int64_t r = 0; r < rows; ++r) {
          fetch_keys.rows(1);
          __m512 x = column[r * s.q_parts];
          for (int i = 1; i < s.q_parts; ++i) x = _mm512_add_ps(x, column[r * s.q_parts + i]);
          _mm512_storeu_ps(s.scores + (r0 + r) * s.ld + k0, _mm512_mul_ps(x, factor));
        }
      }
      continue;
    }
    for (int64_t k0 = 0; k0 < used; k0 += 16) {
      __m512i t[16];
      for (int m = 0; m < 16; ++m) t[m] = _mm512_load_si512(s.score_tiles + (k0 + m) * 16);
      fetch_keys.rows(2);
      transpose16x16(t);
      fetch_keys.rows(2);
      for (int64_t r = 0; r < rows; ++r) {
        fetch_keys.rows(1);
        __m512 x = _mm512_castsi512_ps(t[r * s.q_parts]);
        for (int i = 1; i < s.q_parts; ++i) {
          x = _mm512_add_ps(x, _mm512_castsi512_ps(t[r * s.q_parts + i]));
        }
        _mm512_storeu_ps(s.scores + (r0 + r) * s.ld + k0, _mm512_mul_ps(x, factor));
      }
    }
  }
  fetch_keys.rest();
  if (fp8_keys && !key_decoder.safe()) return false;
  // With FP8 V rows the softmax state goes to scratch until every V row is decoded and checked,
  // right before the first change to O; else in place.
  float* row_max = s.row_max;
  float* row_sum = s.row_sum;
  float* rescale = s.rescale;
  if (fp8_values) {
    row_max = s.row_state;
    row_sum = row_max + s.rows;
    rescale = row_sum + s.rows;
    std::copy(s.row_max, s.row_max + s.rows, row_max);
    std::copy(s.row_sum, s.row_sum + s.rows, row_sum);
  }
  softmax_by_rows(s.scores, s.ld, s.rows, count, s.first, s.last, row_max, row_sum, rescale);

  // out = rescale * out + P V, a block of rows and 4 blocks of 32 columns at a time.
  const BlockOrder order;
  const int64_t blocks = s.dim_v_padded / kTileBf16;
  for (int64_t r0 = 0; r0 < s.rows; r0 += rb) {
    const int64_t rows = std::min(rb, s.rows - r0);
    for (int64_t k0 = 0; k0 < used; k0 += 16) {
      weight_tile(s.scores + r0 * s.ld, s.ld, rows, rb, s.weight_parts, k0, count,
                  s.weight_tiles + k0 * 16);
      fetch_values.rows(4);
    }
    for (int64_t c0 = 0; c0 < blocks; c0 += 4) {
      const int64_t n = std::min<int64_t>(4, blocks - c0);
      Tiles::template zero<1>();
      Tiles::template zero<2>();
      Tiles::template zero<3>();
      Tiles::template zero<4>();
      for (int64_t k0 = 0; k0 < used; k0 += 16) {
        const TileRows v = tile_rows(vf, s.values, k0, s.dim_v_padded, s.value_rows, fp8_values);
        Tiles::template load<5>(s.weight_tiles + k0 * 16, 64);
        product_block<Tiles, 0>(v, c0);
        fetch_values.rows(1);
        if (n > 1) product_block<Tiles, 1>(v, c0 + 1);
        fetch_values.rows(1);
        if (n > 2) product_block<Tiles, 2>(v, c0 + 2);
        if (n > 3) product_block<Tiles, 3>(v, c0 + 3);
        fetch_values.rows(4);
        if (fp8_values && r0 == 0 && c0 == 0 && k0 + kValuesAhead < used) {
          value_decoder.decode(k0 + kValuesAhead, k0 + kValuesAhead + 16, fetch_values);
        }
      }
      if (fp8_values && r0 == 0 && c0 == 0) {
        if (!value_decoder.safe()) return false;
        std::copy(row_max, row_max + s.rows, s.row_max);
        std::copy(row_sum, row_sum + s.rows, s.row_sum);
        std::copy(rescale, rescale + s.rows, s.rescale);
      }
      store_products<Tiles, 0>(s.products);
      if (n > 1) store_products<Tiles, 1>(s.products);
      if (n > 2) store_products<Tiles, 2>(s.products);
      if (n > 3) store_products<Tiles, 3>(s.products);
      for (int64_t r = 0; r < rows; ++r) {
        const __m512 row_rescale = _mm512_set1_ps(s.rescale[r0 + r]);
        for (int64_t j = 0; j < n; ++j) {
          fetch_values.rows(1);
          const float* product = s.products + j * 256 + 2 * r * 16;
          __m512 even = _mm512_loadu_ps(product), odd = _mm512_loadu_ps(product + 16);
          for (int i = 1; i < s.weight_parts; ++i) {
            even = _mm512_add_ps(even, _mm512_loadu_ps(product + 2 * i * rb * 16));
            odd = _mm512_add_ps(odd, _mm512_loadu_ps(product + 2 * i * rb * 16 + 16));
          }
          float* o = s.out + (r0 + r) * s.out_stride + (c0 + j) * kTileBf16;
          _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_loadu_ps(o), row_rescale,
                                              _mm512_permutex2var_ps(even, order.low, odd)));
          _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(_mm512_loadu_ps(o + 16), row_rescale,
                                                   _mm512_permutex2var_ps(even, order.high, odd)));
        }
      }
    }
  }
  fetch_values.rest();
  return true;
}

template <class Tiles>
void release_tiles() {
  Tiles::release();
}

// The AMX set on `Tiles`: the AVX-512 VBMI kernels plus the many-row kernels (amx_bf16.h)
// and the few-row kernel above. Not the
// few-row scores as bf16 dot products of the AVX-512 BF16 set: on the GPU machine's Sapphire
// Rapids host (two 512-bit FMA ports) they decoded MXFP8 caches 1.2-1.7x slower than the FMA
// scores; they pay on Zen 4, whose one 512-bit FMA a cycle the
// dot products double.
template <class Tiles>
constexpr FastKernels make_amx_kernels(SimdIsa isa) {
  FastKernels k = make_kernels<Avx512>(isa);
  k.scores_from_rows = scores_from_rows;
  k.softmax_by_rows = softmax_by_rows;
  k.accumulate_from_rows = accumulate_from_rows;
  k.pack_bf16_keys = pack_bf16_keys;
  k.pack_bf16_values = pack_bf16_values;
  k.attend_bf16 = attend_bf16<Tiles>;
  k.attend_rows_bf16 = attend_rows_bf16<Tiles>;
  k.release_tiles = release_tiles<Tiles>;
  return k;
}

}  // namespace
}  // namespace mxattn::cpu::simd
