// Delayed rows (state kDelayed): queued and visible, but not handed out before a time. Two
// causes: a retry (queue_abort(seconds), or a copy's pending retry), which the file keeps
// in RETURN records; and the row's VISIBLE_AT_COLUMN, a TIMESTAMP in the row itself, read
// again at open. Each delay has a deadline in a DeadlineHeap; its token tells a deadline
// that still applies from one whose row was deleted or delayed again since.
#pragma once
#include <memory>
#include <unordered_map>

#include "core/policy/policy.h"
#include "core/util/deadline_heap.h"

namespace q4m {

class Delays : public PolicyBase {
 public:
  // VISIBLE_AT_COLUMN: the rows queued now (each read once) and every row inserted from now
  // on. The first column wins (a new column is a new table).
  void configure(const TableOptions& options, RowContext& ctx);
  // Rows whose retry delay was still ahead when the server stopped wait for it again.
  void opened(RecoveredTable& recovered, RowContext& ctx);
  // A copy's pending retry, else the row's VISIBLE_AT_COLUMN time if still ahead.
  void placing_new(RowEntry& e, std::string_view payload, const RowHistory* history, Placement& p, RowContext& ctx);
  // A row given back with a delay (p.delay), or a claimed row whose delay still stands.
  void placing(RowEntry& e, Placement& p, RowContext& ctx);
  void moved(RowEntry& e, RowState from, const Holder* previous, const Move& m, RowContext& ctx);
  void removed(const RowEntry& before, RowContext&);
  SteadyClock::time_point due(RowContext& ctx);  // delays that ran out: back to the queue
  void keeping(const RowEntry& e, fmt::ReturnedRow& kept) const;
  void forget();

 private:
  struct Token {
    uint64_t token = 0;
    uint64_t due_ms = 0;  // wall clock, as the file keeps it
    bool retry = true;    // a retry's delay, which the file keeps; not a VISIBLE_AT_COLUMN one
  };
  bool live(const Deadline& d) const {
    auto it = tokens_.find(d.id);
    return it != tokens_.end() && it->second.token == d.token;
  }
  std::shared_ptr<const VisibleAtColumn> visible_at_;
  DeadlineHeap deadlines_;
  // A row's deadline is live while this maps the row to its token; its pop, or the row's
  // removal, erases the entry. Kept while a DELETE claims the row: if the DELETE fails the
  // row goes back to its delay.
  std::unordered_map<RowId, Token> tokens_;
};

}  // namespace q4m
