// Who holds what in sequence parallelism (spec §8): the shards of the sequence, the heads each rank
// gets after the forward all-to-all, and which rank carries each MX block of 32 keys. Pure
// functions of the sizes, identical on every rank, so the ranks never need to ask each other.
#pragma once

#include <cstdint>
#include <vector>

namespace mxattn::dist {

// Rows [offset, offset + length) of the whole sequence, or of whatever axis a tensor shards along.
struct Shard {
  int64_t offset = 0;
  int64_t length = 0;
  int64_t end() const { return offset + length; }
};

// Rank r's shard follows rank r-1's.
std::vector<Shard> contiguous_shards(const std::vector<int64_t>& lengths);

// The heads rank `rank` of `ranks` holds after the forward all-to-all.
//
// Query heads split evenly. Local query head i reads local KV head i / kv_group, which must be the
// global KV head (q_first + i) / group: with kv_group = gcd(q_count, group) every run of kv_group
// local query heads starts on a multiple of kv_group and so lies within one global group. When
// Hkv % P == 0 this is the plain split (kv_group = group, the rank's Hkv/P KV heads); otherwise the
// KV heads are replicated: several ranks read the same one, and a rank whose query heads cover a
// group only in part may hold one KV head more than once.
struct HeadSlice {
  int64_t q_first = 0;      // first global query head
  int64_t q_count = 0;      // Hq / P
  int64_t group = 1;        // global GQA group, Hq / Hkv
  int64_t kv_group = 1;     // local GQA group
  int64_t kv_count = 0;     // local KV heads, q_count / kv_group
  int64_t kv_first = 0;     // first global KV head the rank reads
  int64_t kv_distinct = 0;  // distinct global KV heads from kv_first: what travels to the rank

  int64_t kv_of_local(int64_t j) const { return (q_first + j * kv_group) / group; }
};

HeadSlice head_slice(int64_t heads_q, int64_t heads_kv, int64_t ranks, int64_t rank);

// Local KV heads [local_first, local_first + count) are received heads [received_first, ...), the
// received heads being the rank's distinct KV heads in order. Consecutive runs, so that a copy
// moves as many heads at once as it can.
struct HeadRun {
  int64_t local_first = 0;
  int64_t received_first = 0;
  int64_t count = 0;
};

std::vector<HeadRun> kv_head_runs(const HeadSlice& slice);

// MX blocks of 32 keys along the key axis (V scales along the keys): the rank whose shard holds a
// block's first key carries the block's scale, so every block travels exactly once.
Shard carried_key_blocks(const Shard& keys);

// Blocks that hold keys of more than one rank: their scale must be agreed on before quantizing.
std::vector<int64_t> straddled_key_blocks(const std::vector<Shard>& key_shards);

}  // namespace mxattn::dist
