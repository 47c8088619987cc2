// The register-fragment views the prefill kernel relies on, checked on the host with CuTe's layout
// algebra (no GPU needed), for every kernel instance's tiles:
// - P = softmax(S) feeds the P V product straight from S's accumulator registers: each register of
//   S, seen through acc_as_a_operand, holds the (row, key) element the A operand expects there;
// - rows_cols puts the same query rows at the same row index in S and in O, and the four threads
//   sharing a row are one quad (the softmax's shuffles and the epilogue's LSE store assume it);
// - the mask's columns, relative to each thread's first one, are the same offsets in every thread
//   and keep each key's sparse granule;
// - eight head-dim elements of a row of Q or of V are one aligned 16-byte chunk of shared memory
//   (the stores of MX Q's dequantization and of V's zeroed rows).
#include <gtest/gtest.h>

#include <cute/tensor.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "cuda/prefill/fragments.cuh"
#include "cuda/prefill/kernel_traits.cuh"
#include "cuda/prefill/prefill_params.h"

namespace mxattn::cuda::prefill {
namespace {

using namespace cute;

template <class Traits>
void check_p_feeds_pv() {
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  typename Traits::TiledMmaQK mma_qk;
  typename Traits::TiledMmaPV mma_pv;
  for (int t = 0; t < Traits::kMmaThreads; ++t) {
    // (row, key) of each S register, and of each A register of P V (M x K = rows x keys).
    const auto s_coords = mma_qk.get_thread_slice(t).partition_C(
        make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
    const auto a_coords = mma_pv.get_thread_slice(t).partition_A(
        make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
    const auto s_as_a = make_tensor(s_coords.data(), acc_as_a_operand(s_coords.layout()));
    ASSERT_EQ(size(s_as_a), size(a_coords));
    for (int i = 0; i < size(a_coords); ++i) {
      ASSERT_EQ(get<0>(s_as_a(i)), get<0>(a_coords(i))) << "thread " << t << " value " << i;
      ASSERT_EQ(get<1>(s_as_a(i)), get<1>(a_coords(i))) << "thread " << t << " value " << i;
    }
  }
}

template <class Traits>
void check_rows() {
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kDimV = Traits::kDimV;
  typename Traits::TiledMmaQK mma_qk;
  typename Traits::TiledMmaPV mma_pv;
  std::map<int, std::set<int>> threads_of_row;
  std::map<int, int> lse_writers;
  for (int t = 0; t < Traits::kMmaThreads; ++t) {
    const auto s = rows_cols_view(mma_qk.get_thread_slice(t).partition_C(
        make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    const auto o = rows_cols_view(mma_pv.get_thread_slice(t).partition_C(
        make_identity_tensor(Shape<Int<kBlockM>, Int<kDimV>>{})));
    ASSERT_EQ(size<0>(s), size<0>(o));
    for (int r = 0; r < size<0>(s); ++r) {
      const int row = get<0>(s(r, 0));
      for (int c = 0; c < size<1>(s); ++c) ASSERT_EQ(get<0>(s(r, c)), row);
      for (int c = 0; c < size<1>(o); ++c) ASSERT_EQ(get<0>(o(r, c)), row);
      // Adjacent columns come in pairs: the epilogue stores them as one word.
      for (int c = 0; c + 1 < size<1>(o); c += 2) {
        ASSERT_EQ(get<1>(o(r, c)) % 2, 0);
        ASSERT_EQ(get<1>(o(r, c + 1)), get<1>(o(r, c)) + 1);
      }
      threads_of_row[row].insert(t);
      if (t % 4 == 0) ++lse_writers[row];
    }
  }
  ASSERT_EQ(int(threads_of_row.size()), kBlockM);
  for (const auto& [row, threads] : threads_of_row) {
    ASSERT_EQ(threads.size(), 4u) << "row " << row;
    ASSERT_EQ(*threads.begin() % 4, 0) << "row " << row;
    ASSERT_EQ(*threads.rbegin(), *threads.begin() + 3) << "row " << row;
    ASSERT_EQ(lse_writers[row], 1) << "row " << row;
  }
}

// mask_scores tests S's columns relative to the thread's first one: the offsets must be the same in
// every thread (compile-time constants in the kernel) and name the key's 16-key sparse granule.
template <class Traits>
void check_mask_columns() {
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  typename Traits::TiledMmaQK mma_qk;
  const auto offsets_of = [&](int t) {
    const auto s = rows_cols_view(mma_qk.get_thread_slice(t).partition_C(
        make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    std::vector<int> offsets;
    const int first = get<1>(s(0, 0));
    for (int c = 0; c < size<1>(s); ++c) {
      const int key = get<1>(s(0, c));
      EXPECT_EQ(key / kSparseGranule, (key - first) / kSparseGranule) << "thread " << t;
      offsets.push_back(key - first);
    }
    return offsets;
  };
  const std::vector<int> offsets = offsets_of(0);
  for (int t = 1; t < Traits::kMmaThreads; ++t) ASSERT_EQ(offsets_of(t), offsets) << "thread " << t;
}

// A swizzled shared buffer of `Layout` on a 1024-byte boundary (as the kernel aligns its storage),
// and a check that `at(row, d)`, the address of head-dim element d of a row, puts each run of eight
// elements (16 bytes, from a multiple of 8) in one aligned chunk, the chunks of all rows covering
// the buffer once.
template <class Element, class Layout>
struct SharedBuffer {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(cosize_v<Layout> * sizeof(Element) + 1024);
  Element* base() {
    const uintptr_t a = (reinterpret_cast<uintptr_t>(bytes.data()) + 1023) & ~uintptr_t(1023);
    return reinterpret_cast<Element*>(a);
  }
};

template <class Element, class At>
void check_chunks(int rows, int dim, At at) {
  constexpr int kChunk = 16 / int(sizeof(Element));
  std::set<const Element*> starts;
  for (int row = 0; row < rows; ++row)
    for (int d = 0; d < dim; d += kChunk) {
      const Element* chunk = at(row, d);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(chunk) % 16, 0u) << d << " " << row;
      for (int j = 1; j < kChunk; ++j) ASSERT_EQ(at(row, d + j), chunk + j);
      starts.insert(chunk);
    }
  EXPECT_EQ(starts.size(), size_t(rows * dim / kChunk));
}

// zero_invalid_v_rows (mainloop.cuh) clears V's key rows 16 bytes at a time: in the swizzled
// shared layout of V^T, the head-dim elements [8 c, 8 c + 8) of a key row in a stage are one
// aligned 16-byte chunk.
template <class Traits>
void check_v_row_chunks() {
  using Element = typename Traits::Element;
  SharedBuffer<Element, typename Traits::SmemLayoutVt> buffer;
  Tensor sVt = make_tensor(make_smem_ptr(buffer.base()), typename Traits::SmemLayoutVt{});
  // Rows of every stage, one after another.
  check_chunks<Element>(Traits::kStages * Traits::kBlockN, Traits::kDimV, [&](int row, int d) {
    return static_cast<const Element*>(&sVt(d, row % Traits::kBlockN, row / Traits::kBlockN));
  });
}

// dequantize_q (q_codes.cuh) writes MX Q's bf16 values 16 bytes at a time: the same of Q's rows.
template <class Traits>
void check_q_row_chunks() {
  using Element = typename Traits::Element;
  SharedBuffer<Element, typename Traits::SmemLayoutQ> buffer;
  Tensor sQ = make_tensor(make_smem_ptr(buffer.base()), typename Traits::SmemLayoutQ{});
  check_chunks<Element>(Traits::kBlockM, Traits::kDimQK,
                        [&](int row, int d) { return static_cast<const Element*>(&sQ(row, d)); });
}

template <class Traits>
void check_instance() {
  check_p_feeds_pv<Traits>();
  check_rows<Traits>();
  check_mask_columns<Traits>();
  check_v_row_chunks<Traits>();
  check_q_row_chunks<Traits>();
}

TEST(PrefillFragments, PFeedsPvAndRowsLineUp) {
  check_instance<KernelTraits<cutlass::bfloat16_t, 64, 64>>();
  check_instance<KernelTraits<cutlass::bfloat16_t, 128, 128>>();
  check_instance<KernelTraits<cutlass::bfloat16_t, 256, 256>>();
  check_instance<KernelTraits<cutlass::bfloat16_t, 192, 128>>();
  check_instance<KernelTraits<cutlass::half_t, 128, 128>>();
}

}  // namespace
}  // namespace mxattn::cuda::prefill
