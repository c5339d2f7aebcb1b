// Relay metrics, printed every --stats-interval seconds and at exit.
#pragma once

#include <chrono>
#include <cstdint>

namespace q4m::forward {

struct RelayCounters {
  uint64_t relayed = 0;          // rows the destination accepted
  uint64_t replays_dropped = 0;  // rows the destination dropped as already received
  uint64_t src_reconnects = 0;
  uint64_t dst_reconnects = 0;
  uint64_t last_rowid = 0;       // source row id of the last row delivered
};

class StatsReporter {
 public:
  explicit StatsReporter(double interval_s);
  void maybe_report(const RelayCounters& c);  // when the interval has passed
  void report(const RelayCounters& c, const char* label);

 private:
  using Clock = std::chrono::steady_clock;
  double interval_s_;
  Clock::time_point start_, last_;
  uint64_t relayed_at_last_ = 0;
};

}  // namespace q4m::forward
