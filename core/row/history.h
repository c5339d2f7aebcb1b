#pragma once
#include <cstdint>

namespace q4m {

// What a row has been through, which a copy of it keeps (a copying ALTER TABLE moves rows
// into a new table): its insert time, the deliveries that ended without a removal (a
// delivery in progress is not counted, as across a restart) and a pending retry delay.
struct RowHistory {
  uint64_t insert_time_ms = 0;  // wall clock; 0 = inserted now
  uint32_t deliveries = 0;
  uint64_t due_ms = 0;  // wall-clock ms a queue_abort(delay) holds it back until; 0 = none
};

}  // namespace q4m
