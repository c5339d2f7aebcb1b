// MariaDB record <-> stored row payload (layout: storage/row_payload.h).
// Fixed-size fields are stored as their raw record bytes, VARCHAR and BLOB as their data
// only, and the record's null-flag area verbatim.
#pragma once
#include <string>
#include <string_view>

struct TABLE;
typedef unsigned char uchar;

namespace q4m_engine {

// `id_column`: the position of the table's ROW_ID_COLUMN (-1: none). Its value is the row's
// id, not stored: a row stores 0 there (not NULL), so that a row's bytes are the same on
// every server whatever id its INSERT asked for.

// Encodes `record` (table->record[0] or a same-layout buffer) into *out.
void encode_row(const TABLE* table, const uchar* record, int id_column, std::string* out);

// Fills `record` from `payload`, the ROW_ID_COLUMN with `id` (0: the row has none yet, a row
// its transaction has not committed: NULL, or 0 in a NOT NULL column). BLOB fields point
// into `payload`, which must stay alive and unchanged while the record is in use. False if
// the payload does not fit the table's definition.
bool decode_row(const TABLE* table, std::string_view payload, int id_column, uint64_t id, uchar* record);

// The id `record` asks for in its ROW_ID_COLUMN (0: none, NULL or 0).
uint64_t asked_id(const TABLE* table, const uchar* record, int id_column);

}  // namespace q4m_engine
