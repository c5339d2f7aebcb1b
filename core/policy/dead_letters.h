// MAX_DELIVERIES: a row handed out that many times that comes back to the queue is dead
// (SQS's redrive to a dead-letter queue, kept inside the table so that the move is atomic):
// it stays visible and deletable, and only queue_take_dead() hands it out. Its state
// follows from its delivery count, which the file keeps (RETURN records), so it is dead
// again after a restart. A new limit sorts the queued rows again: a higher one (or 0)
// brings dead rows back to the queue, a lower one kills the queued rows at or above it.
//
// A row whose bytes on disk failed their checksum is dead too, for that reason (Move::damaged,
// core/table/damaged_rows.cc): no limit brings it back, it comes back dead if its
// queue_take_dead() taker gives it back, and queue_redrive_dead() leaves it (its bytes cannot
// be copied). It is not counted as dead-lettered (damaged_reads counts the reads that found
// it). The table forgets why at a restart: the row is queued again, and its next read sets it
// aside again.
#pragma once
#include <set>
#include <unordered_set>
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
    if (damaged(e.id)) {  // its bytes are still damaged
      p = Placement{RowState::kDead};
      p.damaged = true;
    } else if (dies(e)) {
      p = Placement{RowState::kDead};  // a dead row waits for no retry
    }
  }
  void moved(RowEntry& e, RowState from, const Holder*, const Move& m, RowContext& ctx) {
    if (from == RowState::kDead) dead_.erase(e.id);
    if (m.to != RowState::kDead) return;
    dead_.insert(e.id);
    if (m.damaged) {
      damaged_.insert(e.id);
    } else if (!m.fresh) {  // (a copy of a dead row was dead before)
      ctx.counters->rows_dead_lettered.add();
      global_stats().rows_dead_lettered.add();
    }
  }
  void removed(const RowEntry& before, RowContext&) {
    if (before.state == RowState::kDead) dead_.erase(before.id);
    if (!damaged_.empty()) damaged_.erase(before.id);
  }
  void forget() {
    dead_.clear();
    damaged_.clear();
  }

  // The oldest dead row (queue_take_dead()), 0 if none; the `max` oldest ones, without the
  // damaged ones if `copyable` (queue_redrive_dead()).
  RowId oldest() const { return dead_.empty() ? 0 : *dead_.begin(); }
  std::vector<RowId> oldest(size_t max, bool copyable = false) const;
  // Row `id` was set aside for its damaged bytes.
  bool damaged(RowId id) const { return !damaged_.empty() && damaged_.count(id) != 0; }
  // Owned row `e` was lent out by queue_take_dead(): its taker decides what becomes of it.
  bool lent(const RowEntry& e) const { return e.state == RowState::kOwned && (damaged(e.id) || !in_line(e, max_)); }

 private:
  // A row back from its max-th delivery is dead, not queued again.
  bool dies(const RowEntry& e) const { return max_ != 0 && e.deliveries >= max_; }
  uint32_t max_ = 0;  // 0 = no limit
  std::set<RowId> dead_;  // the kDead rows, oldest first
  std::unordered_set<RowId> damaged_;  // live rows set aside for damaged bytes (dead, or lent out)
};

}  // namespace q4m
