#include "queue_backend.h"

#include <cstdlib>

namespace q4m::bench {

namespace {
// Keeps preload statements well under the default max_allowed_packet (16 MiB).
constexpr size_t kPreloadStatementBytes = 1 << 20;
}  // namespace

EngineCounters counter_delta(const EngineCounters& before, const EngineCounters& after) {
  EngineCounters d;
  for (const auto& [name, value] : after) {
    uint64_t base = 0;
    for (const auto& [bname, bvalue] : before)
      if (bname == name) base = bvalue;
    d.emplace_back(name, value >= base ? value - base : 0);  // a gauge that shrank: no growth
  }
  return d;
}

EngineCounters read_counters(client::DbConn& admin, const std::string& sql, unsigned name_col, unsigned value_col) {
  EngineCounters c;
  client::DbResult r = admin.query(sql);
  while (MYSQL_ROW row = r.next())
    if (row[name_col] && row[value_col]) c.emplace_back(row[name_col], std::strtoull(row[value_col], nullptr, 10));
  return c;
}

client::DbStatement& BatchInsert::prepare(uint64_t count) {
  for (auto& [rows, s] : statements_)
    if (rows == count) return *s;
  statements_.emplace_back(count, std::make_unique<client::DbStatement>(conn_, codec_.insert_statement(count), protocol_));
  return *statements_.back().second;
}

void QueueBackend::drop_table(client::DbConn& admin) { admin.exec("DROP TABLE IF EXISTS " + table()); }

void QueueBackend::preload(client::DbConn& admin, uint64_t first, uint64_t count) {
  std::string sql = codec_.insert_prefix();
  bool pending = false;
  for (uint64_t id = first; id < first + count; ++id) {
    if (pending) sql.push_back(',');
    codec_.append_values(id, &sql);
    pending = true;
    if (sql.size() >= kPreloadStatementBytes) {
      admin.exec(sql);
      sql = codec_.insert_prefix();
      pending = false;
    }
  }
  if (pending) admin.exec(sql);
}

uint64_t QueueBackend::rows_left(client::DbConn& admin) {
  return admin.scalar_u64("SELECT COUNT(*) FROM " + table());
}

}  // namespace q4m::bench
