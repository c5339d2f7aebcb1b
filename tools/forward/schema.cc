#include "schema.h"

#include <strings.h>

#include "db_error.h"
#include "log.h"

namespace q4m::forward {

std::vector<TableColumn> read_queue_table_columns(Connection& conn, const Endpoint& ep) {
  std::string where = " WHERE TABLE_SCHEMA = " + conn.quote(ep.db) + " AND TABLE_NAME = " + conn.quote(ep.table);
  auto engine = conn.query("SELECT ENGINE FROM information_schema.TABLES" + where);
  if (engine.empty())
    throw DbError(ErrorKind::kConfig, 0, std::string(conn.role()) + ": table " + ep.describe() + " does not exist");
  if (!engine[0][0] || strcasecmp(engine[0][0]->c_str(), "QUEUE") != 0)
    throw DbError(ErrorKind::kConfig, 0,
                  std::string(conn.role()) + ": table " + ep.describe() + " is not a QUEUE table (engine " +
                      engine[0][0].value_or("none") + "); relaying needs ENGINE=QUEUE on both sides");
  std::vector<TableColumn> columns;
  for (const SqlRow& row : conn.query("SELECT COLUMN_NAME, IS_GENERATED FROM information_schema.COLUMNS" + where +
                                      " ORDER BY ORDINAL_POSITION")) {
    TableColumn c;
    c.name = row[0].value_or("");
    c.generated = row[1] && strcasecmp(row[1]->c_str(), "NEVER") != 0;
    columns.push_back(c);
  }
  return columns;
}

std::vector<std::string> columns_to_relay(const std::vector<TableColumn>& src,
                                          const std::vector<TableColumn>& dst, const Endpoint& dst_ep) {
  auto find = [&](const std::string& name) -> const TableColumn* {
    for (const TableColumn& c : dst)
      if (strcasecmp(c.name.c_str(), name.c_str()) == 0) return &c;  // column names are case-insensitive
    return nullptr;
  };
  std::vector<std::string> out;
  for (const TableColumn& s : src) {
    const TableColumn* d = find(s.name);
    if (!d) {
      if (s.generated) continue;  // derived data: nothing is lost
      throw DbError(ErrorKind::kConfig, 0, "destination table " + dst_ep.describe() + " has no column `" + s.name +
                                               "`; its values would be lost");
    }
    if (!d->generated) out.push_back(s.name);
  }
  for (const TableColumn& d : dst) {
    bool copied = false;
    for (const std::string& name : out) copied = copied || strcasecmp(name.c_str(), d.name.c_str()) == 0;
    if (!copied && !d.generated) log_line("note: destination column `%s` is not in the source; it gets its default", d.name.c_str());
  }
  if (out.empty()) throw DbError(ErrorKind::kConfig, 0, "no columns to relay");
  return out;
}

}  // namespace q4m::forward
