#include "txn_tables.h"

namespace q4m::bench {

namespace {

std::string orders_sql() {
  return std::string("CREATE TABLE ") + kOrdersTable +
         " (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, payload LONGBLOB NOT NULL) ENGINE=InnoDB";
}

std::string results_sql() {
  return std::string("CREATE TABLE ") + kResultsTable + " (id BIGINT UNSIGNED NOT NULL PRIMARY KEY) ENGINE=InnoDB";
}

}  // namespace

std::vector<std::string> txn_tables_sql() { return {orders_sql(), results_sql()}; }

void recreate_txn_tables(client::DbConn& admin) {
  drop_txn_tables(admin);
  admin.exec(orders_sql());
  admin.exec(results_sql());
}

void drop_txn_tables(client::DbConn& admin) {
  admin.exec(std::string("DROP TABLE IF EXISTS ") + kOrdersTable + ", " + kResultsTable);
}

std::string check_txn_table(client::DbConn& admin, const char* table, uint64_t m) {
  client::DbResult r = admin.query(std::string("SELECT COUNT(*), COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM ") + table);
  MYSQL_ROW row = r.next();
  if (!row) return std::string(table) + ": no answer to COUNT(*)";
  const uint64_t count = std::stoull(row[0]), min = std::stoull(row[1]), max = std::stoull(row[2]);
  if (count == m && (m == 0 || (min == 0 && max == m - 1))) return "";
  return std::string(table) + " has " + std::to_string(count) + " rows (ids " + std::to_string(min) + ".." +
         std::to_string(max) + "), expected " + std::to_string(m) + " (ids 0.." + std::to_string(m ? m - 1 : 0) + ")";
}

TxnStatements::TxnStatements(client::DbConn& conn, const MessageCodec& codec, client::Protocol protocol)
    : codec_(codec),
      order_(conn, std::string("INSERT INTO ") + kOrdersTable + " (id, payload) VALUES (?, ?)", protocol),
      result_(conn, std::string("INSERT INTO ") + kResultsTable + " (id) VALUES (?)", protocol),
      commit_(conn, "COMMIT", protocol),
      rollback_(conn, "ROLLBACK", protocol) {
  // As the InnoDB queue's sessions: no gap locks on the rows they write.
  conn.exec("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  conn.exec("SET SESSION autocommit = 0");
}

void TxnStatements::insert_order(uint64_t id) {
  payload_.clear();
  if (codec_.payload().enabled()) codec_.payload().append(id, &payload_);
  order_.run({id, std::string_view(payload_)});
}

}  // namespace q4m::bench
