// MESSAGE_GROUP_COLUMN (SQS's MessageGroupId): rows whose group column holds the same value
// are handed out one at a time, in row-id order. A group's next row goes out only once the
// row before it is gone (ended, deleted, expired) or dead; while it is owned, delayed for a
// retry or claimed by a DELETE, the group waits. Other groups, and rows whose column is NULL
// (no group), are not held up.
//
// The key lives in the row itself, so groups need nothing in the file: they are found again
// from the payloads at open, in row-id order, and hold across restarts, crashes and
// compaction with the rows. Grouped rows (RowEntry::grouped) are gated: they go out when
// GroupOrder says they are ready, not in the table's plain scan order.
#pragma once
#include <memory>
#include <vector>

#include "core/policy/group_order.h"
#include "core/policy/policy.h"

namespace q4m {

class MessageGroups : public PolicyBase {
 public:
  // The column is set once (a new column is a new table): the rows in the table now are
  // read once. A new MAX_DELIVERIES may change which rows are in line.
  void configure(const TableOptions& options, RowContext& ctx);
  void added(RowEntry& e, std::string_view payload, RowContext& ctx);
  void moved(RowEntry& e, RowState, const Holder*, const Move&, RowContext& ctx) {
    if (e.grouped) order_.refresh(e.id, lookup(ctx));
  }
  void removed(const RowEntry& before, RowContext& ctx) {
    if (before.grouped) order_.remove(before.id, lookup(ctx));
  }
  bool gates(const RowEntry& e) const { return e.grouped; }
  bool allows(const RowEntry& e) const { return !e.grouped || order_.is_ready(e.id); }
  RowId first_released() const { return order_.first_ready(); }
  bool releasing() const { return order_.has_newly_ready(); }
  void released(std::vector<RowId>* out) { *out = order_.take_newly_ready(); }
  // New rows were offered one by one as they were added: nothing more to offer for them.
  void published(RowContext&) { order_.forget_newly_ready(); }
  void forget() { order_.clear(); }  // the column stays: new rows join groups again
  void report(TableStats& s) const { s.message_groups = order_.group_count(); }

 private:
  // How GroupOrder sees the rows.
  GroupOrder::RowLookup lookup(RowContext& ctx) const;
  std::shared_ptr<const KeyColumn> column_;
  uint32_t max_deliveries_ = 0;  // which rows are in line (dead_letters.h)
  GroupOrder order_;
};

}  // namespace q4m
