#include "server_sync.h"

namespace q4m::bench {

ServerSync::ServerSync(client::DbConn& admin) : binlog_(admin.scalar("SELECT @@GLOBAL.log_bin", "0") == "1") {}

void ServerSync::apply(client::DbConn& admin, SyncMode mode) {
  // 2 = write the log at commit, fsync once a second: survives a server crash,
  // not a machine crash, exactly like queue_sync_mode=none.
  saved_.set(admin, "innodb_flush_log_at_trx_commit", mode == SyncMode::kNone ? "2" : "1");
  // Two-phase commit with the binary log: a transaction is committed once it is in the
  // binary log, which is durable only when synced at commit.
  if (binlog_) saved_.set(admin, "sync_binlog", mode == SyncMode::kNone ? "0" : "1");
}

std::string ServerSync::describe(SyncMode mode) const {
  std::string s = std::string("innodb_flush_log_at_trx_commit=") + (mode == SyncMode::kNone ? "2" : "1");
  if (binlog_) s += std::string(", sync_binlog=") + (mode == SyncMode::kNone ? "0" : "1");
  return s;
}

EngineCounters ServerSync::counters(client::DbConn& admin) {
  return read_counters(admin,
                       "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_data_fsyncs', 'Innodb_log_writes', "
                       "'Binlog_commits', 'Binlog_group_commits')",
                       0, 1);
}

}  // namespace q4m::bench
