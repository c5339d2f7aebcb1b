#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <handler.h>
#include <mdl.h>
#include <log.h>

#include "engine/transactions.h"

#include <algorithm>

#include "core/table/registry.h"
#include "core/table/transaction.h"
#include "core/util/clock.h"
#include "engine/binlog_statements.h"
#include "engine/connection_state.h"
#include "engine/handlerton.h"
#include "engine/relay_notes.h"
#include "engine/dedup_notes.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"

namespace q4m_engine {

namespace {

// The time of the event being applied, in ms: a rows event carries whole seconds, so the end
// of that second (a row dated no earlier than on its primary), but not later than now.
uint64_t event_time_ms(THD* thd) {
  const uint64_t end_of_second = static_cast<uint64_t>(thd->query_start()) * 1000 + 999;
  return std::min(end_of_second, q4m::now_ms());
}

bool in_explicit_transaction(THD* thd) { return thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN); }

// The end of the whole transaction (else of one statement inside it). In autocommit the
// server commits each statement with all = false.
bool ends_transaction(THD* thd, bool all) { return all || !in_explicit_transaction(thd); }

int commit(handlerton*, THD* thd, bool all) {
  ConnectionState* cs = peek_connection_state(thd);
  if (cs && ends_transaction(thd, all)) cs->end_snapshot();
  if (!cs || !cs->transaction() || !ends_transaction(thd, all)) return 0;
  const q4m::QueueTable* failed = nullptr;
  const bool two_phase = cs->transaction()->prepared();
  if (two_phase) crash_at(CrashPoint::kBeforeCommit);
  q4m::Status st = cs->transaction()->commit(&failed);
  if (!two_phase) {  // a prepare noted them
    note_replays(thd, *cs->transaction());
    note_duplicates(thd, *cs->transaction());
  }
  cs->end_transaction();
  if (st.ok() && two_phase) crash_at(CrashPoint::kAfterCommit);
  if (st.ok()) return 0;
  if (failed)
    raise_table_error(table_label_of_path(failed->path()), st);
  else
    raise_status_error(st);
  return HA_ERR_GENERIC;
}

// Called in the coordinator's commit order (the binary log's), one transaction at a time,
// possibly from another connection's thread while thd's waits: QUEUE places the rows of
// transactions in that order, so a replica applying the log places them as the primary did.
//
// With the binary log coordinating, the commit record waits for no sync: the binlog has the
// transaction and its recovery commits it again after a crash, until QUEUE says in
// commit_checkpoint_request() that every commit ordered so far is durable. (The rows it
// commits get the same ids then: recovery commits in the binlog's order, engine/xa.h.)
void commit_ordered(handlerton*, THD* thd, bool all) {
  ConnectionState* cs = peek_connection_state(thd);
  if (!cs || !cs->transaction() || !cs->transaction()->prepared() || !ends_transaction(thd, all)) return;
  crash_at(CrashPoint::kBeforeCommitRecord);
  cs->transaction()->queue_commit(/*durable=*/!mysql_bin_log.is_open());
}

// The binary log asks (once per binlog file, at rotation) that the commits ordered so far be
// durable before it stops keeping their transactions for recovery: one sync per table that
// wrote since its last, behind every commit already queued there.
void commit_checkpoint_request(void* cookie) {
  for (const auto& table : q4m::TableRegistry::instance().open_tables()) {
    q4m::Status s = table->sync_commits();
    if (!s.ok())  // the file is broken: every later write to it fails, so nothing more is lost
      sql_print_error("QUEUE: syncing %s for a binary log checkpoint failed: %s", table->path().c_str(),
                      s.message().c_str());
  }
  commit_checkpoint_notify_ha(cookie);
}

int rollback(handlerton*, THD* thd, bool all) {
  ConnectionState* cs = peek_connection_state(thd);
  if (cs && ends_transaction(thd, all)) cs->end_snapshot();
  if (!cs || !cs->transaction()) return 0;
  if (ends_transaction(thd, all)) {
    cs->transaction()->rollback();
    cs->end_transaction();
  } else {
    cs->transaction()->rollback_to(cs->statement_mark());  // a failed statement: its changes only
  }
  return 0;
}

// A savepoint is a position in the transaction's log of changes.
int savepoint_set(handlerton*, THD* thd, void* sv) {
  ConnectionState* cs = peek_connection_state(thd);
  *static_cast<size_t*>(sv) = cs && cs->transaction() ? cs->transaction()->mark() : 0;
  return 0;
}

int savepoint_rollback(handlerton*, THD* thd, void* sv) {
  ConnectionState* cs = peek_connection_state(thd);
  if (cs && cs->transaction()) cs->transaction()->rollback_to(*static_cast<size_t*>(sv));
  return 0;
}

// What a rolled-back savepoint undid holds no lock of ours: its metadata locks may go.
bool savepoint_rollback_can_release_mdl(handlerton*, THD*) { return true; }

// The connection's transaction, registered with the server as a writer for this statement
// (and, if `whole`, for the transaction around it) on the statement's first use.
q4m::Transaction& join(THD* thd, bool whole) {
  ConnectionState& cs = connection_state(thd);
  const bool new_statement = cs.statement_query_id() != thd->query_id;
  q4m::Transaction& txn = cs.begin_transaction(thd->query_id);
  if (new_statement) {
    trans_register_ha(thd, false, queue_hton, 0);
    if (whole) trans_register_ha(thd, true, queue_hton, 0);
    thd->ha_data[queue_hton->slot].ha_info[0].set_trx_read_write();
  }
  txn.set_replication_log(binlog_records(thd) ? &binlog_replication_log() : nullptr);
  txn.set_whole(whole);
  txn.set_sync_removals(session_sync_removals(thd));
  // The applier, or a binary log replayed (mariadb-binlog sets pseudo_slave_mode): the log
  // says which new rows its server dropped as duplicates (queue_apply_dedup), and when it
  // inserted them (the statement's time is its event's).
  if (thd->slave_thread || thd->variables.pseudo_slave_mode)
    txn.set_decided(true, event_time_ms(thd));
  else
    txn.set_decided(false);
  return txn;
}

// START TRANSACTION WITH CONSISTENT SNAPSHOT: the server calls it holding its commit-order
// lock (LOCK_commit_ordered), as commit_ordered() is, so the snapshot's point splits the
// queue's commits where InnoDB's read view splits its own (core/table/snapshots.h). The engine
// joins the transaction (read-only) to learn its end.
int start_consistent_snapshot(handlerton*, THD* thd) {
  connection_state(thd).begin_snapshot();
  trans_register_ha(thd, true, queue_hton, 0);
  return 0;
}

}  // namespace

bool in_consistent_snapshot(THD* thd) {
  ConnectionState* cs = peek_connection_state(thd);
  return cs && cs->snapshot() && in_explicit_transaction(thd);
}

q4m::Transaction* open_transaction(THD* thd) {
  ConnectionState* cs = find_connection_state(thd);
  return cs ? cs->transaction() : nullptr;
}

q4m::Transaction* joined_transaction(THD* thd, bool* failed) {
  *failed = false;
  if (!in_explicit_transaction(thd)) return nullptr;
  if (!queue_hton->prepare) {
    // The server takes two-phase commit from an engine installed while it runs with the
    // binary log off; joining without it would turn off InnoDB's for the transaction too.
    my_printf_error(ER_NOT_SUPPORTED_YET,
                    "QUEUE tables cannot take part in transactions on this server: the QUEUE engine was "
                    "installed while the server ran (INSTALL SONAME) with the binary log off, so MariaDB gives "
                    "it no two-phase commit. Restart the server (it then loads QUEUE at startup), or use "
                    "autocommit",
                    MYF(0));
    *failed = true;
    return nullptr;
  }
  return &join(thd, true);
}

q4m::Transaction* binlogged_statement_transaction(THD* thd) {
  if (in_explicit_transaction(thd) || !binlog_records(thd)) return nullptr;
  return &join(thd, false);
}

q4m::Transaction* statement_transaction(THD* thd) {
  bool failed = false;
  q4m::Transaction* txn = joined_transaction(thd, &failed);
  if (failed) return nullptr;
  return txn ? txn : &join(thd, false);
}

q4m::Transaction* consumer_transaction(THD* thd, bool* failed) {
  q4m::Transaction* txn = joined_transaction(thd, failed);
  if (*failed) return nullptr;
  return txn ? txn : binlogged_statement_transaction(thd);
}

bool change_in_transaction(THD* thd, const std::function<q4m::Status(q4m::Transaction&)>& change,
                           q4m::Status* status) {
  bool failed = false;
  q4m::Transaction* txn = consumer_transaction(thd, &failed);
  if (failed) return false;
  if (txn) {
    *status = change(*txn);
    return true;
  }
  q4m::Transaction now(thd->thread_id);  // no transaction, no binary log: at once
  *status = change(now);
  if (status->ok()) *status = now.commit();
  return true;
}

q4m::Transaction* joined_transaction_for_owned(THD* thd, bool* failed) {
  q4m::Transaction* txn = consumer_transaction(thd, failed);
  ConnectionState* cs = find_connection_state(thd);
  if (!txn || !cs || cs->owned_db().empty()) return txn;
  if (!lock_until_transaction_end(thd, cs->owned_db(), cs->owned_table_name())) {
    *failed = true;
    return nullptr;
  }
  return txn;
}

bool lock_until_transaction_end(THD* thd, const std::string& db, const std::string& table) {
  MDL_request mdl;
  MDL_REQUEST_INIT(&mdl, MDL_key::TABLE, db.c_str(), table.c_str(), MDL_SHARED_WRITE, MDL_TRANSACTION);
  return !thd->mdl_context.acquire_lock(&mdl, thd->variables.lock_wait_timeout);
}

void install_transaction_hooks(handlerton* hton) {
  hton->commit = commit;
  hton->commit_ordered = commit_ordered;
  hton->commit_checkpoint_request = commit_checkpoint_request;
  hton->start_consistent_snapshot = start_consistent_snapshot;
  hton->rollback = rollback;
  hton->savepoint_offset = sizeof(size_t);
  hton->savepoint_set = savepoint_set;
  hton->savepoint_rollback = savepoint_rollback;
  hton->savepoint_rollback_can_release_mdl = savepoint_rollback_can_release_mdl;
}

}  // namespace q4m_engine
