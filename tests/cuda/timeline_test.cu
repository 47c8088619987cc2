// The per-CTA timeline of a diagnostics build (MXATTN_TIMELINE), checked without a GPU: the
// benchmarks' summary of recorded stamps (bench/cuda/bench_common.cuh) on stamps made up here, and
// the kernels' stamp function (src/cuda/timeline.cuh) compiled with the option on, as no other
// target of a normal build compiles it.
#ifndef MXATTN_TIMELINE
#error "this test is built with MXATTN_TIMELINE defined"
#endif

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "cuda/timeline.cuh"

// Compiled, never launched: the stamp function with the option on (external linkage, so that
// the compiler keeps it without a caller).
__global__ void timeline_test_stamp_every_mark(uint64_t* records, int64_t ctas) {
  for (int mark = 0; mark < mxattn::cuda::detail::kMarkSm; ++mark) {
    mxattn::cuda::detail::timeline_stamp(records, ctas, mark);
  }
}

namespace {

constexpr int kSlots = mxattn::cuda::kTimelineSlots;

// CTA c of the prefill marks: stamps in ns (0: not reached) and its SM.
void set_cta(std::vector<uint64_t>& t, int c, std::vector<uint64_t> stamps, uint64_t sm) {
  for (size_t k = 0; k < stamps.size(); ++k) t[size_t(c * kSlots) + k] = stamps[k];
  t[size_t(c * kSlots + kSlots - 1)] = sm;
}

TEST(Timeline, PhasesGapsAndCsvOfMadeUpStamps) {
  ASSERT_EQ(kPrefillMarks.size(), 5u);
  std::vector<uint64_t> t(4 * kSlots, 0);
  // SM 0 runs CTA 0, then CTA 2 from 1 us after CTA 0's end; SM 1 runs CTA 1; CTA 3 had nothing
  // to compute (no stamps past its entry).
  set_cta(t, 0, {1'000'000, 1'001'000, 1'002'000, 1'010'000, 1'011'000}, 0);
  set_cta(t, 1, {1'000'500, 1'001'500, 1'003'500, 1'012'500, 1'013'500}, 1);
  set_cta(t, 2, {1'012'000, 1'013'000, 1'014'000, 1'020'000, 1'021'000}, 0);
  set_cta(t, 3, {1'012'500, 0, 0, 0, 0}, 1);
  FILE* csv = std::tmpfile();
  ASSERT_NE(csv, nullptr);
  const TimelineSummary s = summarize_timeline(t, kPrefillMarks, "D128", csv);

  EXPECT_EQ(s.ctas, 4);
  EXPECT_DOUBLE_EQ(s.span, 21.0);
  ASSERT_EQ(s.phases.size(), 5u);
  EXPECT_EQ(s.phases[0], (std::vector<double>{11.0, 13.0, 9.0}));  // CTA 3 counts in no phase
  EXPECT_EQ(s.phases[1], (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(s.phases[2], (std::vector<double>{1.0, 2.0, 1.0}));
  EXPECT_EQ(s.phases[3], (std::vector<double>{8.0, 9.0, 6.0}));
  EXPECT_EQ(s.gaps, (std::vector<double>{1.0}));
  EXPECT_EQ(s.sm_first, (std::vector<double>{0.0, 0.5}));
  EXPECT_DOUBLE_EQ(percentile(s.phases[0], 0.5), 11.0);
  EXPECT_DOUBLE_EQ(percentile(s.phases[0], 0.9), 13.0);

  std::rewind(csv);
  std::string text;
  for (int ch = std::fgetc(csv); ch != EOF; ch = std::fgetc(csv)) text += char(ch);
  std::fclose(csv);
  EXPECT_EQ(text,
            "row,cta,sm,entry_ns,q_ready_ns,first_s_ns,loop_done_ns,stored_ns\n"
            "D128,0,0,0,1000,2000,10000,11000\n"
            "D128,1,1,500,1500,3500,12500,13500\n"
            "D128,2,0,12000,13000,14000,20000,21000\n"
            "D128,3,1,12500,,,,\n");
}

TEST(Timeline, NothingRecordedGivesNoPhases) {
  const std::vector<uint64_t> t(3 * kSlots, 0);
  const TimelineSummary s = summarize_timeline(t, kDecodeMarks, "B8", nullptr);
  EXPECT_EQ(s.ctas, 3);
  for (const std::vector<double>& p : s.phases) EXPECT_TRUE(p.empty());
  EXPECT_TRUE(s.gaps.empty());
  EXPECT_TRUE(std::isnan(percentile(s.phases[0], 0.5)));
}

}  // namespace
