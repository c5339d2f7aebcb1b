// The two clocks of the core. Wall time (ms since 1970) is what the file keeps: insert
// times, retry deadlines, dedup times; it survives restarts but may step. Steady time
// schedules in-memory deadlines (leases, delays, expiry passes); it never steps.
#pragma once
#include <chrono>
#include <cstdint>

namespace q4m {

using SteadyClock = std::chrono::steady_clock;

inline uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace q4m
