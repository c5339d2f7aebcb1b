// RowIndex: the live rows of one table in row-id order, with where each payload is in the
// data file and who (if anyone) holds it. Not thread-safe: it lives inside the table's
// Guarded state.
//
// Removed rows stay as tombstones and are dropped lazily (from the front at once,
// elsewhere when they outnumber live entries), so removal is O(log n).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>

#include "core/row/holder.h"
#include "core/row/lifecycle.h"
#include "core/row/row_id.h"

namespace q4m {

struct RowEntry {
  RowEntry() : grouped(false), delivering(false) {}
  RowId id = 0;
  uint64_t offset = 0;   // of the payload in the current data file
  uint64_t time_ms = 0;  // insert time (wall clock)
  uint32_t length = 0;
  RowState state = RowState::kFree;
  bool grouped : 1;     // in a message group (MESSAGE_GROUP_COLUMN not NULL): policy/message_groups.h
  // Held (kOwned, or kClaimed by its owner's end) in a delivery that `deliveries` counts
  // already: a crash ends it without counting it (Table::kept_across_restart).
  bool delivering : 1;
  uint16_t deliveries = 0;  // times handed out (saturates); the file keeps it across restarts
  const Holder* holder = nullptr;  // kOwned / kClaimed
};
static_assert(sizeof(RowEntry) <= 40, "grouped and deliveries live in padding: a row's index entry stays 40 bytes");

class RowIndex {
 public:
  // Row ids must be appended in increasing order.
  void append(const RowEntry& e);
  // The entry for `id` (null if absent or removed). Stays valid until the next
  // append/remove/compaction of the index.
  RowEntry* find(RowId id);
  // Marks removed; returns false if absent. *bytes receives the row's length.
  bool remove(RowId id, uint32_t* length = nullptr);
  void clear();

  // Iteration over live entries with id >= from (positional cursor).
  size_t lower_bound(RowId from) const;
  size_t end_pos() const { return rows_.size(); }
  RowEntry& at(size_t pos) { return rows_[pos]; }
  const RowEntry& at(size_t pos) const { return rows_[pos]; }
  const RowEntry* first_live() const;

  uint64_t live() const { return live_; }
  uint64_t live_bytes() const { return live_bytes_; }  // sum of payload lengths

 private:
  void maybe_compact();
  std::deque<RowEntry> rows_;
  uint64_t live_ = 0;
  uint64_t live_bytes_ = 0;
  uint64_t tombstones_ = 0;  // removed entries still in rows_
};

}  // namespace q4m
