// The server's own durability settings, which both queues' runs share (InnoDB's log holds the
// InnoDB queue and the transactional scenarios' order and result rows; the binary log, when
// on, coordinates two-phase commit): innodb_flush_log_at_trx_commit and sync_binlog per
// --sync mode, put back at the end.
#pragma once
#include <string>

#include "../common/db_conn.h"
#include "options.h"
#include "queue_backend.h"
#include "saved_globals.h"

namespace q4m::bench {

class ServerSync {
 public:
  // Reads whether the server runs with the binary log (@@log_bin: a startup setting).
  explicit ServerSync(client::DbConn& admin);
  bool binlog() const { return binlog_; }

  void apply(client::DbConn& admin, SyncMode mode);
  void restore(client::DbConn& admin) { saved_.restore(admin); }
  // The settings apply() makes for `mode`, e.g. "innodb_flush_log_at_trx_commit=1, sync_binlog=1".
  std::string describe(SyncMode mode) const;

  // What the commit path syncs, server-wide: InnoDB's fsyncs (its log and data files) and the
  // binary log's commits and group commits (sync_binlog=1: one fsync per group commit).
  static EngineCounters counters(client::DbConn& admin);
  // The counter of commit syncs besides the queues' own, and whether it counts with `mode`.
  static constexpr const char* kInnodbSyncs = "Innodb_data_fsyncs";
  static constexpr const char* kBinlogSyncs = "Binlog_group_commits";
  bool binlog_syncs(SyncMode mode) const { return binlog_ && mode != SyncMode::kNone; }

 private:
  bool binlog_ = false;
  SavedGlobals saved_;
};

}  // namespace q4m::bench
