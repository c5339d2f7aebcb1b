// A column whose value is a row's key: the column a table's rows are grouped by (the
// engine's MESSAGE_GROUP_COLUMN; the rules for handing grouped rows out are in
// message_groups.h) or deduplicated by (DEDUP_COLUMN, dedup_window.h).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/row/payload.h"

namespace q4m {

struct KeyColumn {
  TableSchema schema;  // of the table's rows
  size_t column = 0;   // index of the key column in schema.columns
  std::string name;    // the column's name, for messages
  // The key of a non-NULL value, such that values the column's collation calls equal get
  // the same key ('A' and 'a' under a case-insensitive collation, 'a' and 'a ' under a PAD
  // SPACE one). Null: the stored bytes are the key. The engine sets it: only the server
  // knows collations.
  std::function<void(std::string_view value, std::string* key)> collate;
};

// The key of the row with this payload. False if the column is NULL (the row has no key:
// it is in no group, never a duplicate) or the payload does not decode.
bool row_key(const KeyColumn& c, std::string_view payload, std::string* key);

}  // namespace q4m
