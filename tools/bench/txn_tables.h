// The InnoDB side of the transactional scenarios, the same for both queues: an orders table
// (outbox: each message's order row) and a results table (consume-txn: each message's
// result), and a session's statements on them. A transactional session runs with
// autocommit=0: its first statement starts the transaction, as after BEGIN, without BEGIN's
// round trip (the InnoDB queue's sessions always run so), in READ COMMITTED.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/db_conn.h"
#include "../common/db_statement.h"
#include "message_codec.h"

namespace q4m::bench {

inline constexpr const char* kOrdersTable = "q4m_bench_orders";
inline constexpr const char* kResultsTable = "q4m_bench_results";

// The tables' CREATE statements, for the report.
std::vector<std::string> txn_tables_sql();
void recreate_txn_tables(client::DbConn& admin);
void drop_txn_tables(client::DbConn& admin);
// "" if `table` holds exactly the ids [0, m) (its primary key: each once), else what is wrong.
std::string check_txn_table(client::DbConn& admin, const char* table, uint64_t m);

class TxnStatements {
 public:
  TxnStatements(client::DbConn& conn, const MessageCodec& codec, client::Protocol protocol);
  // INSERT INTO q4m_bench_orders (id, payload) VALUES (?, ?): the message's payload ('' without --payload).
  void insert_order(uint64_t id);
  // INSERT INTO q4m_bench_results (id) VALUES (?)
  void insert_result(uint64_t id) { result_.run({id}); }
  void commit() { commit_.run({}); }
  void rollback() { rollback_.run({}); }

 private:
  const MessageCodec& codec_;
  client::DbStatement order_, result_, commit_, rollback_;
  std::string payload_;
};

}  // namespace q4m::bench
