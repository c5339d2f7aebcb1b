// Splitting M messages over N clients: client i takes `share` ids starting at
// `share_start`; the ranges are contiguous, disjoint and cover [0, total).
#pragma once
#include <algorithm>
#include <cstdint>

namespace q4m::bench {

inline uint64_t share(uint64_t total, int n, int i) {
  return total / n + (static_cast<uint64_t>(i) < total % n ? 1 : 0);
}

inline uint64_t share_start(uint64_t total, int n, int i) {
  return static_cast<uint64_t>(i) * (total / n) + std::min<uint64_t>(i, total % n);
}

}  // namespace q4m::bench
