#include "stats_json.h"

#include <cstdio>
#include <utility>
#include <vector>

namespace q4m_functions {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string stats_json(const std::string& table_label, q4m::QueueTable& table) {
  q4m::TableInfo info = table.info();
  q4m::TableCounters& c = table.counters();
  const std::vector<std::pair<const char*, uint64_t>> fields = {
      {"rows", info.rows},
      {"owned_rows", info.owned_rows},
      {"delayed_rows", info.delayed_rows},
      {"dead_rows", info.dead_rows},
      {"message_groups", info.message_groups},
      {"max_rows", info.max_rows},
      {"dedup_keys", info.dedup_keys},
      {"waiters", info.waiters},
      {"file_bytes", info.file_bytes},
      {"removed_bytes", info.removed_bytes},
      {"oldest_age_ms", info.oldest_row_age_ms},
      {"next_rowid", info.next_rowid},
      {"dropped_tail_bytes", info.dropped_tail_bytes},
      {"rows_inserted", c.rows_inserted.get()},
      {"rows_removed", c.rows_removed.get()},
      {"waits", c.waits.get()},
      {"ends", c.ends.get()},
      {"aborts", c.aborts.get()},
      {"handoffs", c.handoffs.get()},
      {"lease_expiries", c.lease_expiries.get()},
      {"rows_expired", c.rows_expired.get()},
      {"rows_refused", c.rows_refused.get()},
      {"rows_deduplicated", c.rows_deduplicated.get()},
      {"damaged_reads", c.damaged_reads.get()},
      {"compactions", c.compactions.get()},
  };
  std::string out = "{\"table\": " + quoted(table_label);
  for (const auto& [name, value] : fields) {
    out += ", \"";
    out += name;
    out += "\": " + std::to_string(value);
  }
  return out + "}";
}

}  // namespace q4m_functions
