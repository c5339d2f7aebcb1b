#include "core/row/visible_at.h"

#include <vector>

namespace q4m {

int64_t visible_at_ms(const VisibleAtColumn& c, std::string_view payload) {
  thread_local std::vector<RowPayloadView::Column> columns;
  if (c.column >= c.schema.columns.size() || !RowPayloadView::decode(c.schema, payload, &columns)) return 0;
  const RowPayloadView::Column& v = columns[c.column];
  // MariaDB's TIMESTAMP(n): 4 big-endian bytes of seconds, then (n + 1) / 2 big-endian bytes
  // of fraction in units of 10 ms (1 byte), 100 us (2 bytes) or 1 us (3 bytes).
  if (v.is_null || v.bytes.size() < 4 || v.bytes.size() > 7) return 0;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(v.bytes.data());
  uint64_t seconds = 0, fraction = 0;
  for (size_t i = 0; i < 4; i++) seconds = seconds << 8 | p[i];
  for (size_t i = 4; i < v.bytes.size(); i++) fraction = fraction << 8 | p[i];
  int64_t ms = static_cast<int64_t>(seconds) * 1000;
  switch (v.bytes.size() - 4) {
    case 1: ms += static_cast<int64_t>(fraction) * 10; break;
    case 2: ms += static_cast<int64_t>((fraction + 9) / 10); break;
    case 3: ms += static_cast<int64_t>((fraction + 999) / 1000); break;
    default: break;
  }
  return ms;
}

}  // namespace q4m
