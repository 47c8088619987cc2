// What the GPU benchmark programs share: CUDA and Status checks that end the program with a
// message, a device hash for filling inputs with random data (never zeros: zeros run faster), the
// comma-separated lists of their command lines, and (in a diagnostics build, MXATTN_TIMELINE) the
// recording and summary of the kernels' per-CTA timelines.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "mxattn/cuda.h"
#include "mxattn/status.h"

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

inline void check_status(const mxattn::Status& st, const char* what) {
  if (!st) {
    std::fprintf(stderr, "%s: %s\n", what, st.message().c_str());
    std::exit(1);
  }
}

__device__ inline uint32_t device_hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}

// The items of a comma-separated list, empty ones dropped.
inline std::vector<std::string> split_list(const char* text) {
  std::vector<std::string> items;
  std::string item;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!item.empty()) items.push_back(item);
      item.clear();
      if (*c == '\0') break;
    } else {
      item += *c;
    }
  }
  return items;
}

// False, after saying why, when --timeline gave a CSV path but this build records no timeline
// (only a build with -DMXATTN_TIMELINE=ON does).
inline bool timeline_available(const char* csv_path) {
#ifndef MXATTN_TIMELINE
  if (csv_path != nullptr) {
    std::fprintf(stderr, "--timeline: this build records no timeline (-DMXATTN_TIMELINE=ON)\n");
    return false;
  }
#endif
  (void)csv_path;
  return true;
}

#ifdef MXATTN_TIMELINE
// The marks of each engine's CTAs (src/cuda/timeline.cuh), in order; the last one ends the CTA.
inline const std::vector<std::string> kDecodeMarks = {
    "entry", "started", "q_ready", "first_data", "loop_done", "merged", "end"};
inline const std::vector<std::string> kPrefillMarks = {"entry", "q_ready", "first_s", "loop_done",
                                                       "stored"};

inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

// What one recorded launch says (summarize_timeline), in us from the launch's first stamp.
struct TimelineSummary {
  int64_t ctas = 0;
  double span = 0;                          // first stamp to the last
  std::vector<double> sm_first;             // each SM's first stamp
  std::vector<std::vector<double>> phases;  // [0]: each CTA whole; [k]: mark k - 1 -> k
  std::vector<double> gaps;                 // an SM's slot empty: a CTA's first stamp minus
                                            // the latest last stamp on its SM before it
};

// The stamps of one recorded launch (kTimelineSlots words per CTA, the last the SM; 0 where a CTA
// did not reach a mark) for the `marks` of its engine, the last ending the CTA. Appends them to
// `csv` when given (row, cta, sm, then the marks in ns from the launch's first stamp; empty where
// not reached). CTAs without their first or last stamp (nothing to compute) count in no phase.
inline TimelineSummary summarize_timeline(const std::vector<uint64_t>& t,
                                          const std::vector<std::string>& marks,
                                          const std::string& row, FILE* csv) {
  constexpr int kSlots = mxattn::cuda::kTimelineSlots;
  const int n = int(marks.size());
  TimelineSummary s;
  s.ctas = int64_t(t.size()) / kSlots;
  s.phases.resize(static_cast<size_t>(n));
  uint64_t origin = UINT64_MAX;
  for (int64_t c = 0; c < s.ctas; ++c)
    if (t[size_t(c * kSlots)] != 0) origin = std::min(origin, t[size_t(c * kSlots)]);
  if (csv != nullptr && std::ftell(csv) == 0) {
    std::fprintf(csv, "row,cta,sm");
    for (const std::string& m : marks) std::fprintf(csv, ",%s_ns", m.c_str());
    std::fprintf(csv, "\n");
  }
  std::vector<std::vector<std::pair<double, double>>> by_sm;  // (first, last stamp) per SM
  for (int64_t c = 0; c < s.ctas; ++c) {
    const auto stamp = [&](int k) { return t[size_t(c * kSlots + k)]; };
    if (csv != nullptr) {
      std::fprintf(csv, "%s,%lld,%llu", row.c_str(), static_cast<long long>(c),
                   static_cast<unsigned long long>(stamp(kSlots - 1)));
      for (int k = 0; k < n; ++k) {
        if (stamp(k) != 0) {
          std::fprintf(csv, ",%llu", static_cast<unsigned long long>(stamp(k) - origin));
        } else {
          std::fprintf(csv, ",");
        }
      }
      std::fprintf(csv, "\n");
    }
    const uint64_t first = stamp(0), last = stamp(n - 1);
    if (first == 0 || last == 0) continue;
    for (int k = 1; k < n; ++k) {
      const uint64_t from = stamp(k - 1), to = stamp(k);
      if (from != 0 && to != 0) s.phases[size_t(k)].push_back(double(to - from) * 1e-3);
    }
    s.phases[0].push_back(double(last - first) * 1e-3);
    const size_t sm = size_t(stamp(kSlots - 1));
    if (by_sm.size() <= sm) by_sm.resize(sm + 1);
    by_sm[sm].push_back({double(first - origin) * 1e-3, double(last - origin) * 1e-3});
    s.span = std::max(s.span, double(last - origin) * 1e-3);
  }
  for (auto& events : by_sm) {
    if (events.empty()) continue;
    std::sort(events.begin(), events.end());
    s.sm_first.push_back(events.front().first);
    for (size_t i = 1; i < events.size(); ++i) {
      double latest_end = -1;
      for (size_t j = 0; j < i; ++j)
        if (events[j].second <= events[i].first)
          latest_end = std::max(latest_end, events[j].second);
      if (latest_end >= 0) s.gaps.push_back(events[i].first - latest_end);
    }
  }
  return s;
}

// Where a CTA's time goes: each phase's median and 90th percentile, the whole CTA's, and the SMs'
// empty-slot gaps.
inline void print_timeline(const TimelineSummary& s, const std::vector<std::string>& marks,
                           const std::string& row) {
  std::printf(
      "timeline %s: %lld CTAs, %.1f us from the first stamp to the last; the SMs' first "
      "stamps at %.1f-%.1f us\n",
      row.c_str(), static_cast<long long>(s.ctas), s.span, percentile(s.sm_first, 0.0),
      percentile(s.sm_first, 1.0));
  std::printf("  %-26s %8s %8s\n", "phase (us)", "median", "p90");
  std::printf("  %-26s %8.2f %8.2f\n", "whole CTA", percentile(s.phases[0], 0.5),
              percentile(s.phases[0], 0.9));
  for (size_t k = 1; k < marks.size(); ++k) {
    const std::string name = marks[k - 1] + " -> " + marks[k];
    std::printf("  %-26s %8.2f %8.2f\n", name.c_str(), percentile(s.phases[k], 0.5),
                percentile(s.phases[k], 0.9));
  }
  std::printf("  %-26s %8.2f %8.2f\n", "slot empty (end -> next)", percentile(s.gaps, 0.5),
              percentile(s.gaps, 0.9));
}

// Runs `launch` (one launch of `ctas` CTAs) once with every CTA's timestamps recorded
// (cuda::set_kernel_timeline): appended to `csv_path` and summarized on stdout.
template <class Launch>
void record_timeline(const char* csv_path, const std::string& row, int64_t ctas,
                     const std::vector<std::string>& marks, Launch launch) {
  constexpr int kSlots = mxattn::cuda::kTimelineSlots;
  uint64_t* records = nullptr;
  CHECK_CUDA(cudaMalloc(&records, size_t(ctas) * kSlots * 8));
  CHECK_CUDA(cudaMemset(records, 0, size_t(ctas) * kSlots * 8));
  CHECK_CUDA(cudaDeviceSynchronize());
  mxattn::cuda::set_kernel_timeline(records, ctas);
  launch();
  CHECK_CUDA(cudaDeviceSynchronize());
  mxattn::cuda::set_kernel_timeline(nullptr, 0);
  std::vector<uint64_t> t(size_t(ctas) * kSlots);
  CHECK_CUDA(cudaMemcpy(t.data(), records, t.size() * 8, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(records));
  FILE* csv = std::fopen(csv_path, "a");
  if (csv == nullptr) {
    std::fprintf(stderr, "--timeline: cannot write %s\n", csv_path);
    std::exit(1);
  }
  const TimelineSummary summary = summarize_timeline(t, marks, row, csv);
  std::fclose(csv);
  print_timeline(summary, marks, row);
}
#endif
