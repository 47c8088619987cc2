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

// The stamps of one recorded launch (kTimelineSlots words per CTA, the last the SM) appended to
// `csv_path` (row, cta, sm, then the marks in ns from the launch's first stamp; empty where a CTA
// did not reach a mark), then where a CTA's time goes on stdout: each phase's median and 90th
// percentile, the whole CTA's, and how long an SM's slot stays empty between one CTA's last stamp
// and the next CTA's first.
inline void summarize_timeline(const char* csv_path, const std::string& row,
                               const std::vector<std::string>& marks,
                               const std::vector<uint64_t>& t) {
  constexpr int kSlots = mxattn::cuda::kTimelineSlots;
  const int n = int(marks.size());
  const int64_t ctas = int64_t(t.size()) / kSlots;
  uint64_t origin = UINT64_MAX;
  for (int64_t c = 0; c < ctas; ++c)
    if (t[size_t(c * kSlots)] != 0) origin = std::min(origin, t[size_t(c * kSlots)]);
  FILE* csv = std::fopen(csv_path, "a");
  if (csv == nullptr) {
    std::fprintf(stderr, "--timeline: cannot write %s\n", csv_path);
    std::exit(1);
  }
  if (std::ftell(csv) == 0) {
    std::fprintf(csv, "row,cta,sm");
    for (const std::string& m : marks) std::fprintf(csv, ",%s_ns", m.c_str());
    std::fprintf(csv, "\n");
  }
  std::vector<std::vector<double>> phase(static_cast<size_t>(n));  // [0]: the whole CTA; [k]: mark k-1 -> k
  std::vector<std::vector<std::pair<double, double>>> by_sm;  // (first, last stamp) per SM, us
  double span = 0;
  for (int64_t c = 0; c < ctas; ++c) {
    const auto stamp = [&](int k) { return t[size_t(c * kSlots + k)]; };
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
    const uint64_t first = stamp(0), last = stamp(n - 1);
    if (first == 0 || last == 0) continue;  // a CTA with nothing to compute
    for (int k = 1; k < n; ++k) {
      const uint64_t from = stamp(k - 1), to = stamp(k);
      if (from != 0 && to != 0) phase[size_t(k)].push_back(double(to - from) * 1e-3);
    }
    phase[0].push_back(double(last - first) * 1e-3);
    const size_t sm = size_t(stamp(kSlots - 1));
    if (by_sm.size() <= sm) by_sm.resize(sm + 1);
    by_sm[sm].push_back({double(first - origin) * 1e-3, double(last - origin) * 1e-3});
    span = std::max(span, double(last - origin) * 1e-3);
  }
  std::fclose(csv);
  std::vector<double> gaps, first_stamps;
  for (auto& events : by_sm) {
    if (events.empty()) continue;
    std::sort(events.begin(), events.end());
    first_stamps.push_back(events.front().first);
    for (size_t i = 1; i < events.size(); ++i) {
      double latest_end = -1;
      for (size_t j = 0; j < i; ++j)
        if (events[j].second <= events[i].first)
          latest_end = std::max(latest_end, events[j].second);
      if (latest_end >= 0) gaps.push_back(events[i].first - latest_end);
    }
  }
  std::printf(
      "timeline %s: %lld CTAs, %.1f us from the first stamp to the last; the SMs' first "
      "stamps at %.1f-%.1f us\n",
      row.c_str(), static_cast<long long>(ctas), span, percentile(first_stamps, 0.0),
      percentile(first_stamps, 1.0));
  std::printf("  %-26s %8s %8s\n", "phase (us)", "median", "p90");
  std::printf("  %-26s %8.2f %8.2f\n", "whole CTA", percentile(phase[0], 0.5),
              percentile(phase[0], 0.9));
  for (int k = 1; k < n; ++k) {
    const std::string name = marks[size_t(k - 1)] + " -> " + marks[size_t(k)];
    std::printf("  %-26s %8.2f %8.2f\n", name.c_str(), percentile(phase[size_t(k)], 0.5),
                percentile(phase[size_t(k)], 0.9));
  }
  std::printf("  %-26s %8.2f %8.2f\n", "slot empty (end -> next)", percentile(gaps, 0.5),
              percentile(gaps, 0.9));
}

// Runs `launch` (one launch of `ctas` CTAs) once with every CTA's timestamps recorded
// (cuda::set_kernel_timeline), then summarize_timeline.
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
  summarize_timeline(csv_path, row, marks, t);
}
#endif
