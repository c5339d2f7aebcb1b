// Describes a QUEUE table's columns for cond::compile (storage/row_payload.h):
// the same column kinds the row codec writes.
#pragma once
#include "../storage/row_payload.h"

struct TABLE_SHARE;
class Field;

namespace q4m_engine {

// How a field's value is stored in a payload.
q4m::ColumnKind column_kind(const Field* field);

// The schema of `share` (its fields point into share->default_values).
q4m::TableSchema schema_of(const TABLE_SHARE* share);

}  // namespace q4m_engine
