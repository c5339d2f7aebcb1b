// MariaDB record <-> stored row payload (layout: storage/row_payload.h).
// Fixed-size fields are stored as their raw record bytes, VARCHAR and BLOB as their data
// only, and the record's null-flag area verbatim.
#pragma once
#include <string>
#include <string_view>

struct TABLE;
typedef unsigned char uchar;

namespace q4m_engine {

// Encodes `record` (table->record[0] or a same-layout buffer) into *out.
void encode_row(const TABLE* table, const uchar* record, std::string* out);

// Fills `record` from `payload`. BLOB fields point into `payload`, which must stay
// alive and unchanged while the record is in use. False if the payload does not fit
// the table's definition.
bool decode_row(const TABLE* table, std::string_view payload, uchar* record);

}  // namespace q4m_engine
