// Per-operation latencies. Each worker thread owns one Latencies (no sharing
// while timing); they are merged after the run.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

namespace q4m::bench {

using Clock = std::chrono::steady_clock;

struct LatencySummary {
  uint64_t count = 0;
  double p50_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

class Latencies {
 public:
  void reserve(size_t n) { samples_ns_.reserve(n); }
  void add(Clock::time_point start, Clock::time_point end) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
    samples_ns_.push_back(static_cast<uint64_t>(ns));
  }
  void merge(const Latencies& other) {
    samples_ns_.insert(samples_ns_.end(), other.samples_ns_.begin(), other.samples_ns_.end());
  }
  // Sorts the samples (call once, after merging).
  LatencySummary summarize();

 private:
  std::vector<uint64_t> samples_ns_;
};

}  // namespace q4m::bench
