#include "stats.h"

#include "log.h"

namespace q4m::forward {

StatsReporter::StatsReporter(double interval_s) : interval_s_(interval_s), start_(Clock::now()), last_(start_) {}

void StatsReporter::maybe_report(const RelayCounters& c) {
  if (interval_s_ <= 0) return;
  if (std::chrono::duration<double>(Clock::now() - last_).count() >= interval_s_) report(c, "stats");
}

void StatsReporter::report(const RelayCounters& c, const char* label) {
  auto now = Clock::now();
  double window = std::chrono::duration<double>(now - last_).count();
  double total = std::chrono::duration<double>(now - start_).count();
  double recent_rate = window > 0 ? (c.relayed - relayed_at_last_) / window : 0;
  double overall_rate = total > 0 ? c.relayed / total : 0;
  log_line("%s: relayed=%llu rate=%.0f rows/s (last %.1fs) avg=%.0f rows/s replays_dropped=%llu "
           "reconnects src=%llu dst=%llu last_rowid=%llu",
           label, static_cast<unsigned long long>(c.relayed), recent_rate, window, overall_rate,
           static_cast<unsigned long long>(c.replays_dropped), static_cast<unsigned long long>(c.src_reconnects),
           static_cast<unsigned long long>(c.dst_reconnects), static_cast<unsigned long long>(c.last_rowid));
  last_ = now;
  relayed_at_last_ = c.relayed;
}

}  // namespace q4m::forward
