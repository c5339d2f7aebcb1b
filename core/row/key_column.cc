#include "core/row/key_column.h"

#include <vector>

namespace q4m {

bool row_key(const KeyColumn& c, std::string_view payload, std::string* key) {
  thread_local std::vector<RowPayloadView::Column> columns;
  if (c.column >= c.schema.columns.size() || !RowPayloadView::decode(c.schema, payload, &columns)) return false;
  const RowPayloadView::Column& v = columns[c.column];
  if (v.is_null) return false;
  if (c.collate)
    c.collate(v.bytes, key);
  else
    key->assign(v.bytes.data(), v.bytes.size());
  return true;
}

}  // namespace q4m
