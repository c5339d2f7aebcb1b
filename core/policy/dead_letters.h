// MAX_DELIVERIES: a row handed out that many times that comes back to the queue is dead
// (SQS's redrive to a dead-letter queue, kept inside the table so that the move is atomic):
// it stays visible and deletable, and only queue_take_dead() hands it out. Its state
// follows from its delivery count, which the file keeps (RETURN records), so it is dead
// again after a restart. A new limit sorts the queued rows again: a higher one (or 0)
// brings dead rows back to the queue, a lower one kills the queued rows at or above it.
#pragma once
#include <set>
#include <vector>

#include "core/policy/policy.h"

namespace q4m {

// Whether row `e` still holds its place in line (MESSAGE_GROUP_COLUMN waits for it): not
// once dead, nor while queue_take_dead() lends it out (delivered past the limit).
inline bool in_line(const RowEntry& e, uint32_t max_deliveries) {
  return e.state != RowState::kDead &&
         !(e.state == RowState::kOwned && max_deliveries != 0 && e.deliveries > max_deliveries);
}

class DeadLetters : public PolicyBase {
 public:
  void configure(const TableOptions& options, RowContext& ctx);  // O(rows) when the limit changes
  void placing_new(RowEntry& e, std::string_view, const RowHistory* history, Placement& p, RowContext&) {
    if (history && dies(e)) p = Placement{RowState::kDead};  // a copy of a dead row stays dead
  }
  void placing(RowEntry& e, Placement& p, RowContext&) {
    if (dies(e)) p = Placement{RowState::kDead};  // a dead row waits for no retry
  }
  void moved(RowEntry& e, RowState from, const Holder*, const Move& m, RowContext& ctx) {
    if (from == RowState::kDead) dead_.erase(e.id);
    if (m.to != RowState::kDead) return;
    dead_.insert(e.id);
    if (!m.fresh) {  // (a copy of a dead row was dead before)
      ctx.counters->rows_dead_lettered.add();
      global_stats().rows_dead_lettered.add();
    }
  }
  void removed(const RowEntry& before, RowContext&) {
    if (before.state == RowState::kDead) dead_.erase(before.id);
  }
  void forget() { dead_.clear(); }

  // The oldest dead row (queue_take_dead()), 0 if none; the `max` oldest ones.
  RowId oldest() const { return dead_.empty() ? 0 : *dead_.begin(); }
  std::vector<RowId> oldest(size_t max) const;

 private:
  // A row back from its max-th delivery is dead, not queued again.
  bool dies(const RowEntry& e) const { return max_ != 0 && e.deliveries >= max_; }
  uint32_t max_ = 0;  // 0 = no limit
  std::set<RowId> dead_;  // the kDead rows, oldest first
};

}  // namespace q4m
