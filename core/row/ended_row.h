// History (HISTORY_RETENTION): a row that ended, kept for the table's retention period with
// its payload still in the data file. Never handed out; read with queue_scan_history().
#pragma once
#include <cstdint>

#include "core/row/row_id.h"

namespace q4m {

// How a row ended. 0 is never stored: a removal no history record names (HISTORY_RETENTION
// off, a redrive's copy) leaves no history.
enum class EndKind : uint8_t {
  kNone = 0,
  kConsumed = 1,  // its owner ended it: queue_end(), the next queue_wait(), a batch's end
  kDeleted = 2,   // DELETE
  kPurged = 3,    // dead-lettered (MAX_DELIVERIES, damaged) and purged: queue_purge_dead()
  kExpired = 4,   // MESSAGE_TTL
  kRedriven = 5,  // a dead row queue_redrive_dead() replaced by a copy (a new row, a new id)
};

// "consumed", "deleted", "purged", "expired"; "" for kNone or an unknown value.
inline const char* end_kind_name(EndKind k) {
  switch (k) {
    case EndKind::kConsumed: return "consumed";
    case EndKind::kDeleted: return "deleted";
    case EndKind::kPurged: return "purged";
    case EndKind::kExpired: return "expired";
    case EndKind::kRedriven: return "redriven";
    case EndKind::kNone: break;
  }
  return "";
}

// One history row in memory: 48 bytes (docs/limits.md).
struct EndedRow {
  RowId id = 0;
  uint64_t offset = 0;   // of the payload in the current data file
  uint64_t time_ms = 0;  // insert time (wall clock)
  uint64_t end_ms = 0;   // when it ended (wall clock)
  uint32_t length = 0;
  uint32_t known = 0;    // !stored: the checksum its bytes must match (row_check.h)
  uint16_t deliveries = 0;
  EndKind kind = EndKind::kNone;
  bool stored = true;    // its checksum follows the payload on disk
  bool id_less = false;  // that checksum covers id 0: a TXN_ROW's (RowLocation::id_less)
};
static_assert(sizeof(EndedRow) <= 48, "a history row's memory is documented in docs/limits.md");

}  // namespace q4m
