// GroupOrder: the bookkeeping of MESSAGE_GROUP_COLUMN (policy/message_groups.h), with no
// locks and no knowledge of the table: which grouped row of each group may go out now.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/row/key_column.h"

namespace q4m {

// Which grouped row of each group may go out now (its "ready" row): the group's first row
// in row-id order that is still in line (not dead), if that row is free and no row of the
// group is out (owned). The second condition matters only for a dead row that comes back
// (MAX_DELIVERIES raised) while a later row of its group is out: it waits for that row, so
// a group never has two rows out. Not thread-safe: it lives in the table's state, under the
// state lock. The caller reports every state change of a grouped row (refresh) and every
// removal (remove); rows that became ready are then collected with take_newly_ready() and
// offered to waiters.
class GroupOrder {
 public:
  using RowId = uint64_t;
  // The table's view of a row: whether it still exists, is in line (not dead), is free,
  // is out (owned, and in line).
  struct RowView {
    bool exists = false;
    bool in_line = false;
    bool free = false;
    bool out = false;
  };
  using RowLookup = std::function<RowView(RowId)>;

  // Row `id` joins group `key`. Rows join in row-id order, except a row that comes back.
  void add(RowId id, std::string_view key, const RowLookup& lookup);
  // Row `id` is gone (removed from the table): the next row of its group may be ready.
  void remove(RowId id, const RowLookup& lookup);
  // Row `id` changed state (taken, returned, delayed, claimed, dead, back from the dead).
  void refresh(RowId id, const RowLookup& lookup);
  // Every row may have changed whether it is in line (the delivery limit changed): O(rows).
  void refresh_all(const RowLookup& lookup);

  bool is_member(RowId id) const { return member_.count(id) != 0; }
  bool is_ready(RowId id) const { return ready_.count(id) != 0; }
  // The oldest ready row (0 if none), and the ready rows from `from` on, in row-id order.
  RowId first_ready() const { return ready_.empty() ? 0 : *ready_.begin(); }
  std::set<RowId>::const_iterator ready_from(RowId from) const { return ready_.lower_bound(from); }
  std::set<RowId>::const_iterator ready_end() const { return ready_.end(); }
  // Rows that became ready since the last call (some may have been taken since).
  std::vector<RowId> take_newly_ready();
  bool has_newly_ready() const { return !newly_ready_.empty(); }
  // The same list, when the caller offered those rows itself (new rows, as publish does).
  void forget_newly_ready() { newly_ready_.clear(); }

  size_t group_count() const { return by_key_.size(); }
  void clear();

 private:
  struct Group {
    std::string key;
    // The group's rows in row-id order; ids that left (not in member_) are dropped lazily,
    // from the front at once and elsewhere once they outnumber the members.
    std::deque<RowId> rows;
    size_t members = 0;
    size_t out = 0;   // members seen out (Member::out)
    RowId ready = 0;  // its row in ready_, or 0
  };
  struct Member {
    uint32_t slot = 0;  // its group in groups_
    bool out = false;   // at its last add/refresh
  };
  // Takes `m`'s new view into its group's out count.
  void note_out(Member& m, const RowView& v) {
    if (m.out == v.out) return;
    m.out = v.out;
    if (v.out)
      groups_[m.slot].out++;
    else
      groups_[m.slot].out--;
  }
  void update(uint32_t slot, const RowLookup& lookup);
  void prune(Group& g);

  std::unordered_map<std::string, uint32_t> by_key_;
  std::vector<Group> groups_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<RowId, Member> member_;  // grouped row -> its group
  std::set<RowId> ready_;
  std::vector<RowId> newly_ready_;
};

}  // namespace q4m
