// Describes a QUEUE table's columns for cond::compile (storage/row_payload.h):
// the same column kinds the row codec writes.
#pragma once
#include "core/row/payload.h"

struct TABLE_SHARE;
struct charset_info_st;
class Field;

namespace q4m_engine {

// How a field's value is stored in a payload.
q4m::ColumnKind column_kind(const Field* field);

// The schema of `share` (its fields point into share->default_values).
q4m::TableSchema schema_of(const TABLE_SHARE* share);

// Condition literals arrive in `literal_charset` (the queue_wait() argument's): each text
// column of `schema` (made by schema_of(share)) in another character set converts them to its
// own, as SQL does before it compares (a literal with a character it cannot hold is refused,
// as SQL refuses the comparison: "Illegal mix of collations").
void convert_literals_from(const charset_info_st* literal_charset, const TABLE_SHARE* share,
                           q4m::TableSchema* schema);

}  // namespace q4m_engine
