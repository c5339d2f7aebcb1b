#include "latency.h"

#include <algorithm>

namespace q4m::bench {

LatencySummary Latencies::summarize() {
  LatencySummary s;
  s.count = samples_ns_.size();
  if (samples_ns_.empty()) return s;
  std::sort(samples_ns_.begin(), samples_ns_.end());
  // Nearest-rank percentile.
  auto rank = [&](double p) {
    size_t idx = static_cast<size_t>(p * static_cast<double>(samples_ns_.size()) + 0.999999);
    idx = std::clamp<size_t>(idx, 1, samples_ns_.size());
    return static_cast<double>(samples_ns_[idx - 1]) / 1000.0;
  };
  s.p50_us = rank(0.50);
  s.p99_us = rank(0.99);
  s.max_us = static_cast<double>(samples_ns_.back()) / 1000.0;
  return s;
}

}  // namespace q4m::bench
