// How long rows waited before they were handed out: a fixed-bucket histogram of atomics
// (Prometheus-style), filled by the table's hand-out path under its existing lock and read
// by anyone without one. Buckets are in milliseconds, the resolution of a row's insert time.
#pragma once
#include <array>
#include <cstdint>

#include "core/util/stats.h"

namespace q4m {

class WaitHistogram {
 public:
  // Upper bounds (ms, inclusive) of the finite buckets; one more bucket holds the rest (+Inf).
  static constexpr std::array<uint64_t, 15> kBoundsMs = {1,     5,     10,    50,     100,    500,    1000,   5000,
                                                          10000, 30000, 60000, 300000, 600000, 1800000, 3600000};
  static constexpr size_t kBuckets = kBoundsMs.size() + 1;

  void observe(uint64_t ms) {
    size_t i = 0;
    while (i < kBoundsMs.size() && ms > kBoundsMs[i]) i++;
    buckets_[i].add();
    sum_ms_.add(ms);
  }
  // Rows observed at most kBoundsMs[i] (cumulative, as Prometheus counts a bucket);
  // i == kBoundsMs.size() gives every row.
  uint64_t cumulative(size_t i) const {
    uint64_t n = 0;
    for (size_t b = 0; b <= i && b < kBuckets; b++) n += buckets_[b].get();
    return n;
  }
  uint64_t count() const { return cumulative(kBuckets - 1); }
  uint64_t sum_ms() const { return sum_ms_.get(); }

 private:
  std::array<Counter, kBuckets> buckets_;
  Counter sum_ms_;
};

}  // namespace q4m
