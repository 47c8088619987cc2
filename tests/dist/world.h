// The communicator of the tests that run under mpirun (every rank runs every test, in the same
// order, since the tests are collective), and the helpers that keep the ranks in step.
#pragma once

#include <gtest/gtest.h>

#include "mxattn/dist.h"

namespace mxattn::test {

dist::Communicator& world();

// True on every rank when `mine` is true on every rank. Tests end a step together with it, so that
// one rank's failed check never leaves the others waiting in the next collective.
bool all_ranks(bool mine);

// A test whose checks may fail on some ranks only: it fails on every rank, so that rank 0's summary
// tells the truth.
class CollectiveTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_TRUE(all_ranks(!HasFailure())) << "a check failed on another rank (see its output)";
  }
};

}  // namespace mxattn::test
