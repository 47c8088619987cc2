// The main of the MPI tests: an MPI communicator over all ranks for the whole run. Rank 0 prints
// the progress; every rank prints its own failures, prefixed with its rank.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "dist/world.h"

namespace mxattn::test {
namespace {

std::unique_ptr<dist::Communicator> g_world;

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

}  // namespace

dist::Communicator& world() {
  return *g_world;
}

bool all_ranks(bool mine) {
  float failed = mine ? 0.0f : 1.0f;
  if (!world().all_reduce_max(&failed, 1)) return false;
  return failed == 0.0f;
}

}  // namespace mxattn::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (mxattn::Status st = mxattn::dist::make_mpi_communicator({}, &mxattn::test::g_world); !st) {
    std::fprintf(stderr, "MPI communicator: %s\n", st.message().c_str());
    return 1;
  }
  const int rank = mxattn::test::world().rank();
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new mxattn::test::RankFailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  mxattn::test::g_world.reset();
  return result;
}
