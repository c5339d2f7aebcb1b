// MESSAGE_GROUP_COLUMN (SQS's MessageGroupId) and the limits per group: rows whose group
// column holds the same value form a group, whose rows are handed out in row-id order, at
// most GROUP_CONCURRENCY at once (1 by default: one at a time, the next only once the row
// before it is gone or dead) and at most GROUP_RATE per second (a token bucket of
// GROUP_BURST per group). A row over a limit waits; other groups, and rows whose column is
// NULL (no group), are not held up. The rules are GroupOrder's (group_order.h).
//
// The key lives in the row itself, so groups need nothing in the file: they are found again
// from the payloads at open, in row-id order, and hold across restarts, crashes and
// compaction with the rows. Rows out (owned) come back to the queue at a restart, so no
// group has a row out then; token buckets start full. Grouped rows (RowEntry::grouped) are
// gated: they go out when GroupOrder says they are ready, not in the table's plain scan
// order. The limits live here, with the order, because which rows of a group may go depends
// on both: the plain scan takes the oldest ready row of all groups at once.
#pragma once
#include <memory>
#include <unordered_set>
#include <vector>

#include "core/policy/group_order.h"
#include "core/policy/policy.h"

namespace q4m {

class MessageGroups : public PolicyBase {
 public:
  // The column is set once (a new column is a new table): the rows in the table now are
  // read once. New limits, or a new MAX_DELIVERIES (which rows are in line), look at the
  // groups again.
  void configure(const TableOptions& options, RowContext& ctx);
  void added(RowEntry& e, std::string_view payload, RowContext& ctx);
  void moved(RowEntry& e, RowState from, const Holder*, const Move& m, RowContext& ctx) {
    if (!e.grouped) return;
    // Claimed by the end inside its owner's next wait, or for MESSAGE_TTL's expiry: out of
    // line until its removal commits (or comes back, rolled back), so that the wait may take
    // the group's next row. A claim passed on (to a logged expiry's transaction, to its
    // prepared part) keeps it out: only a way back to the queue (or to an owner) ends that.
    if (m.to == RowState::kClaimed && m.frees_slot)
      ending_.insert(e.id);
    else if (m.to != RowState::kClaimed && !ending_.empty())
      ending_.erase(e.id);
    if (from == RowState::kFree && m.to == RowState::kOwned && !m.fresh) order_.handed_out(e.id, ctx.now());
    order_.refresh(e.id, lookup(ctx), ctx.now());
    watch(ctx);
  }
  void removed(const RowEntry& before, RowContext& ctx) {
    if (!before.grouped) return;
    if (!ending_.empty()) ending_.erase(before.id);
    order_.remove(before.id, lookup(ctx), ctx.now());
    watch(ctx);
  }
  bool gates(const RowEntry& e) const { return e.grouped; }
  bool allows(const RowEntry& e) const { return !e.grouped || order_.is_ready(e.id); }
  RowId first_released() const { return order_.first_ready(); }
  bool releasing() const { return order_.has_newly_ready(); }
  void released(std::vector<RowId>* out) { *out = order_.take_newly_ready(); }
  // New rows were offered one by one as they were added: nothing more to offer for them.
  void published(RowContext&) { order_.forget_newly_ready(); }
  // Groups that waited for a token may let rows go.
  SteadyClock::time_point due(RowContext& ctx) { return order_.due(lookup(ctx), ctx.now()); }
  void forget() {  // the column stays: new rows join groups again
    order_.clear();
    ending_.clear();
  }
  void report(TableStats& s) const {
    s.message_groups = order_.group_count();
    s.groups_at_limit = order_.groups_at_limit();
    s.rows_held_back = order_.held_back();
  }

  // The group of row `e` (null: no group), for subscriptions' own order (subscription_gates.h).
  const std::string* key_of(const RowEntry& e) const { return e.grouped ? order_.key_of(e.id) : nullptr; }

  // INFORMATION_SCHEMA.QUEUE_HELD_GROUPS: up to `max` groups holding rows back.
  std::vector<GroupOrder::HeldGroup> held_groups(size_t max) const {
    return order_.held_groups(max, SteadyClock::now());
  }

 private:
  // How GroupOrder sees the rows.
  GroupOrder::RowLookup lookup(RowContext& ctx) const;
  // The timer passes by when a group's next token is due.
  void watch(RowContext& ctx) const {
    if (order_.limits().rate > 0) ctx.wake_at(order_.next_due());
  }
  std::shared_ptr<const KeyColumn> column_;
  uint32_t max_deliveries_ = 0;  // which rows are in line (dead_letters.h)
  GroupOrder order_;
  std::unordered_set<RowId> ending_;  // claimed with Move::frees_slot: not in line
};

}  // namespace q4m
