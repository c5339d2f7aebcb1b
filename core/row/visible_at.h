// Per-message delay: a table may name a TIMESTAMP column whose value is the time before
// which its row is not handed out (the engine's VISIBLE_AT_COLUMN table option). The time
// lives in the row itself, so it survives restarts, crashes and compaction with the row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/row/payload.h"

namespace q4m {

struct VisibleAtColumn {
  TableSchema schema;  // of the table's rows
  size_t column = 0;   // index of a kTimestamp column in schema.columns
};

// When the row with this payload may be handed out, in milliseconds since 1970 (UTC),
// rounded up; 0 (at once) if the column is NULL or the payload does not decode.
int64_t visible_at_ms(const VisibleAtColumn& c, std::string_view payload);

}  // namespace q4m
