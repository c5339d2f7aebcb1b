#include "core/util/stats.h"

namespace q4m {

GlobalStats& global_stats() {
  static GlobalStats s;
  return s;
}

std::vector<std::pair<std::string, uint64_t>> GlobalStats::snapshot() const {
  return {
      {"sys_write", sys_write.get()},
      {"sys_read", sys_read.get()},
      {"sys_sync", sys_sync.get()},
      {"sync_us", sync_us.get()},
      {"group_commits", group_commits.get()},
      {"unsynced_removal_commits", unsynced_removal_commits.get()},
      {"removals_answered_before_sync", removals_answered_before_sync.get()},
      {"commit_records_before_sync", commit_records_before_sync.get()},
      {"background_syncs", background_syncs.get()},
      {"background_sync_marks", background_sync_marks.get()},
      {"commit_spin_hits", commit_spin_hits.get()},
      {"commit_spin_timeouts", commit_spin_timeouts.get()},
      {"rows_written", rows_written.get()},
      {"rows_removed", rows_removed.get()},
      {"waits", waits.get()},
      {"wait_immediate", wait_immediate.get()},
      {"wait_handoff", wait_handoff.get()},
      {"wait_timeouts", wait_timeouts.get()},
      {"wait_interrupts", wait_interrupts.get()},
      {"wait_yields", wait_yields.get()},
      {"wait_handoffs_passed_over", wait_handoffs_passed_over.get()},
      {"ends", ends.get()},
      {"aborts", aborts.get()},
      {"disconnect_returns", disconnect_returns.get()},
      {"lease_expiries", lease_expiries.get()},
      {"rows_expired", rows_expired.get()},
      {"rows_dead_lettered", rows_dead_lettered.get()},
      {"rows_released", rows_released.get()},
      {"rows_redriven", rows_redriven.get()},
      {"rows_purged", rows_purged.get()},
      {"returns_recorded", returns_recorded.get()},
      {"cond_evals", cond_evals.get()},
      {"cond_compiles", cond_compiles.get()},
      {"cond_cache_hits", cond_cache_hits.get()},
      {"compactions", compactions.get()},
      {"recoveries", recoveries.get()},
      {"damaged_reads", damaged_reads.get()},
      {"memory_bytes", memory_bytes.get()},
  };
}

}  // namespace q4m
