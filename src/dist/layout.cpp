#include "dist/layout.h"

#include <numeric>

#include "mxattn/mx.h"

namespace mxattn::dist {

std::vector<Shard> contiguous_shards(const std::vector<int64_t>& lengths) {
  std::vector<Shard> shards;
  shards.reserve(lengths.size());
  int64_t offset = 0;
  for (const int64_t length : lengths) {
    shards.push_back({offset, length});
    offset += length;
  }
  return shards;
}

HeadSlice head_slice(int64_t heads_q, int64_t heads_kv, int64_t ranks, int64_t rank) {
  HeadSlice s;
  s.q_count = heads_q / ranks;
  s.q_first = rank * s.q_count;
  s.group = heads_q / heads_kv;
  s.kv_group = std::gcd(s.q_count, s.group);
  s.kv_count = s.q_count / s.kv_group;
  s.kv_first = s.kv_of_local(0);
  s.kv_distinct = s.kv_of_local(s.kv_count - 1) - s.kv_first + 1;
  return s;
}

std::vector<HeadRun> kv_head_runs(const HeadSlice& slice) {
  std::vector<HeadRun> runs;
  for (int64_t j = 0; j < slice.kv_count; ++j) {
    const int64_t received = slice.kv_of_local(j) - slice.kv_first;
    if (!runs.empty()) {
      HeadRun& last = runs.back();
      if (last.received_first + last.count == received) {
        ++last.count;
        continue;
      }
    }
    runs.push_back({j, received, 1});
  }
  return runs;
}

Shard carried_key_blocks(const Shard& keys) {
  const int64_t first = (keys.offset + kMxBlock - 1) / kMxBlock;
  const int64_t end = (keys.end() + kMxBlock - 1) / kMxBlock;
  return {first, end - first};
}

std::vector<int64_t> straddled_key_blocks(const std::vector<Shard>& key_shards) {
  const int64_t total = key_shards.empty() ? 0 : key_shards.back().end();
  std::vector<int64_t> blocks;
  // A boundary inside a block (and before the last key) leaves keys of two ranks in that block.
  for (size_t r = 1; r < key_shards.size(); ++r) {
    const int64_t boundary = key_shards[r].offset;
    if (boundary % kMxBlock == 0 || boundary >= total) continue;
    const int64_t block = boundary / kMxBlock;
    if (blocks.empty() || blocks.back() != block) blocks.push_back(block);
  }
  return blocks;
}

}  // namespace mxattn::dist
