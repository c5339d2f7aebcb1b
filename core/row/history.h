#pragma once
#include <cstdint>

#include "core/row/row_id.h"

namespace q4m {

// What a row has been through, which a copy of it keeps (a copying ALTER TABLE moves rows
// into a new table): its insert time, the deliveries that ended without a removal (a
// delivery in progress is not counted, as across a restart), a pending retry delay, its id
// and whether a connection owns it.
struct RowHistory {
  uint64_t insert_time_ms = 0;  // wall clock; 0 = inserted now
  uint32_t deliveries = 0;
  uint64_t due_ms = 0;  // wall-clock ms a queue_abort(delay) holds it back until; 0 = none
  // Its id, kept (queue_rowid() and a relay's dedup see the same row); 0 = the next new id.
  RowId id = 0;
  // A connection owned it when it was copied: the copy holds it back (taken by no one,
  // expired by no TTL) until QueueTable::take_over() says what became of it.
  bool held = false;
  // A copy of a row inserted before (a copying ALTER TABLE, a redrive): DEDUP_COLUMN keeps
  // its key and drops nothing. false: a new row that only carries its insert time.
  bool copy = true;
};

}  // namespace q4m
