#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <handler.h>

#include "engine/xa.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <string>
#include <vector>

#include "core/file/data_file.h"
#include "core/table/registry.h"
#include "core/table/transaction.h"
#include "core/util/guarded.h"
#include "engine/binlog_order.h"
#include "engine/binlog_redo.h"
#include "engine/connection_state.h"
#include "engine/relay_notes.h"
#include "engine/dedup_notes.h"
#include "engine/data_files.h"
#include "engine/handlerton.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"
#include "engine/tc_log_recovery.h"

namespace q4m_engine {

namespace {

// In the datadir while prepared parts may exist: made (and synced) before the first prepare
// of a server run, removed at a clean shutdown that leaves none.
constexpr const char* kPreparedMarker = "./q4m_prepared_parts";

std::atomic<bool> marker_made{false};

q4m::Status make_marker() {
  if (marker_made.load()) return q4m::Status::Ok();
  // The marker is written by one prepare at a time (marker_made lets the later ones skip it).
  static q4m::Guarded<std::string> marker_file(kPreparedMarker);
  auto path = marker_file.lock();
  if (marker_made.load()) return q4m::Status::Ok();
  q4m::Status s = q4m::write_file_atomically(*path, "QUEUE tables may hold prepared transactions\n", false);
  if (s.ok()) marker_made.store(true);
  return s;
}

// An XID as the files keep it: formatID (8 bytes), gtrid and bqual lengths (1 byte each),
// then their bytes.
std::string key_of(const XID& xid) {
  std::string k;
  const uint64_t format = static_cast<uint64_t>(xid.formatID);
  for (int i = 0; i < 8; i++) k.push_back(static_cast<char>(format >> (8 * i)));
  k.push_back(static_cast<char>(xid.gtrid_length));
  k.push_back(static_cast<char>(xid.bqual_length));
  k.append(xid.data, static_cast<size_t>(xid.gtrid_length + xid.bqual_length));
  return k;
}

bool xid_of(const std::string& k, XID* xid) {
  if (k.size() < 10) return false;
  uint64_t format = 0;
  for (int i = 0; i < 8; i++) format |= static_cast<uint64_t>(static_cast<unsigned char>(k[i])) << (8 * i);
  const size_t gtrid = static_cast<unsigned char>(k[8]), bqual = static_cast<unsigned char>(k[9]);
  if (k.size() != 10 + gtrid + bqual || gtrid + bqual > XIDDATASIZE) return false;
  xid->formatID = static_cast<long>(static_cast<int64_t>(format));
  xid->gtrid_length = static_cast<long>(gtrid);
  xid->bqual_length = static_cast<long>(bqual);
  memcpy(xid->data, k.data() + 10, gtrid + bqual);
  return true;
}

int prepare(handlerton* hton, THD* thd, bool all) {
  ConnectionState* cs = peek_connection_state(thd);
  if (!cs || !cs->transaction()) return 0;
  // The end of one statement inside a transaction: nothing to make durable yet.
  if (!all && thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN)) return 0;
  sync_tc_log_once();
  q4m::Status s = make_marker();
  if (!s.ok()) {
    raise_status_error(s);
    return 1;
  }
  MYSQL_XID xid;
  thd_get_xid(thd, &xid);
  const q4m::QueueTable* failed = nullptr;
  crash_at(CrashPoint::kBeforePrepare);
  // The prepare may write statements into the binary log cache (a redo, dropped duplicates, a
  // relay source: binlog_statements.h). Inside COMMIT, whose trans_commit() has cleared
  // SERVER_STATUS_IN_TRANS before the engines' prepare and does not clear it again, the
  // server's write registers the binary log in the transaction (trans_register_ha(all)) and
  // sets the flag anew: the session would stay "in a transaction" after its COMMIT
  // (@@in_transaction = 1; SET gtid_seq_no and sql_log_bin refused, so a mariadb-binlog
  // replay stopped at the next transaction). The flag is the server's before the prepare.
  const uint in_trans = thd->server_status & (SERVER_STATUS_IN_TRANS | SERVER_STATUS_IN_TRANS_READONLY);
  s = cs->transaction()->prepare(key_of(*reinterpret_cast<const XID*>(&xid)), &failed);
  thd->server_status = (thd->server_status & ~(SERVER_STATUS_IN_TRANS | SERVER_STATUS_IN_TRANS_READONLY)) | in_trans;
  if (s.ok()) {
    note_replays(thd, *cs->transaction());
    note_duplicates(thd, *cs->transaction());
    crash_at(CrashPoint::kAfterPrepare);
    return 0;
  }
  if (failed)
    raise_table_error(table_label_of_path(failed->path()), s);
  else
    raise_status_error(s);
  return 1;
}

// The xids prepared in the open tables, each once.
std::vector<std::string> prepared_xids() {
  std::vector<std::string> keys;
  for (const auto& table : q4m::TableRegistry::instance().open_tables())
    for (const auto& part : table->prepared_parts())
      if (std::find(keys.begin(), keys.end(), part.xid) == keys.end()) keys.push_back(part.xid);
  return keys;
}

// `keys` with those the binary log committed first in its order (binlog_order.h); the rest
// (not in the log: to be rolled back, or XA transactions) after them, as they were.
std::vector<std::string> in_binlog_order(std::vector<std::string> keys) {
  if (keys.size() < 2) return keys;  // no order to find: do not read the binary log at every start
  const std::unordered_map<uint64_t, uint64_t> order = binlog_commit_order();
  if (order.empty()) return keys;
  auto rank = [&order](const std::string& key) {
    XID xid;
    if (!xid_of(key, &xid)) return UINT64_MAX;
    auto it = order.find(xid.get_my_xid());
    return it == order.end() ? UINT64_MAX : it->second;
  };
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return keys;
}

// The server decides the transactions a crash left prepared one by one, in an order of its own
// (10.11 walks a hash of xids): QUEUE notes its commits and ends them once all are decided,
// in binlog order (so the ids of their rows are the replica's). Rollbacks give no ids: at once.
struct DeferredCommits {
  bool started = false;                // by the startup's recovery only (defer_commits() once)
  std::vector<std::string> order;      // the prepared xids, in binlog order
  std::vector<std::string> undecided;  // the server's own (internal) xids not decided yet
  std::vector<std::string> decided;    // to commit
};
q4m::Guarded<DeferredCommits> deferred;
std::atomic<bool> deferring{false};  // deferred holds undecided xids (set and cleared under its lock)

void defer_commits(const std::vector<std::string>& keys) {
  auto d = deferred.lock();
  if (d->started) return;
  d->started = true;
  for (const std::string& k : keys) {
    XID xid;
    if (xid_of(k, &xid) && xid.get_my_xid() != 0) d->undecided.push_back(k);
  }
  d->order = keys;
  deferring.store(!d->undecided.empty());
}

int end_by_xid(XID* xid, bool commit);

// Commits what was decided, in binlog order (`d`: the locked deferral).
void end_deferred(DeferredCommits& d) {
  for (const std::string& k : d.order) {
    if (std::find(d.decided.begin(), d.decided.end(), k) == d.decided.end()) continue;
    XID xid;
    if (xid_of(k, &xid)) end_by_xid(&xid, true);
  }
  d.order.clear();
  d.undecided.clear();
  d.decided.clear();
  deferring.store(false);
}

// True if the decision on `xid` was taken over by the deferral.
bool deferred_decision(XID* xid, bool commit) {
  if (!deferring.load()) return false;
  auto d = deferred.lock();
  if (!deferring.load()) return false;
  const std::string key = key_of(*xid);
  auto it = std::find(d->undecided.begin(), d->undecided.end(), key);
  if (it == d->undecided.end()) return false;
  d->undecided.erase(it);
  if (commit) d->decided.push_back(key);
  else end_by_xid(xid, false);
  if (d->undecided.empty()) end_deferred(*d);
  return true;
}

// recover() is called again and again until it returns fewer than asked: a cursor over the
// xids found when it was first called.
struct Recovery {
  std::vector<std::string> keys;
  size_t next = 0;
  bool started = false;
};
q4m::Guarded<Recovery> recovery;

int recover(handlerton* hton, XID* list, uint len) {
  auto r = recovery.lock();
  if (!r->started) {
    r->started = true;
    commit_logged_elsewhere(hton);
    redo_from_binary_log();  // parts a power cut took from the files, before they are listed
    if (q4m::file_exists(kPreparedMarker)) {  // a part may be prepared in any table: open them all
      marker_made.store(true);
      for_each_data_file([](const std::string& db, const std::string& name, const std::string& path) {
        std::shared_ptr<q4m::QueueTable> table;
        q4m::Status st = q4m::TableRegistry::instance().acquire(path, &table);
        if (!st.ok())
          sql_print_warning("QUEUE: table %s.%s not opened for recovery: %s", db.c_str(), name.c_str(),
                            st.message().c_str());
        return true;
      });
    }
    r->keys = in_binlog_order(prepared_xids());
    r->next = 0;
    defer_commits(r->keys);
  }
  uint n = 0;
  while (n < len && r->next < r->keys.size())
    if (xid_of(r->keys[r->next++], &list[n])) n++;
  if (n < len) *r = Recovery();  // the next pass starts over
  return static_cast<int>(n);
}

// Ends every part prepared under `xid` (the server asks every engine: one it does not know
// is not ours).
int end_by_xid(XID* xid, bool commit) {
  const std::string key = key_of(*xid);
  bool found = false;
  for (const auto& table : q4m::TableRegistry::instance().open_tables()) {
    for (const auto& part : table->prepared_parts()) {
      if (part.xid != key) continue;
      found = true;
      q4m::Status s = table->end_part(part.id, commit);
      if (!s.ok()) {
        if (current_thd) raise_status_error(s);
        sql_print_error("QUEUE: %s of a prepared transaction in %s failed: %s", commit ? "commit" : "rollback",
                        table->path().c_str(), s.message().c_str());
      }
    }
  }
  return found ? 0 : 1;
}

int commit_by_xid(handlerton*, XID* xid) { return deferred_decision(xid, true) ? 0 : end_by_xid(xid, true); }
// With the binary log off the server's recovery rolls back every prepared transaction; those its
// tc.log logged as committed are committed instead (tc_log_recovery.h).
int rollback_by_xid(handlerton* hton, XID* xid) {
  if (tc_log_committed(xid->get_my_xid())) return commit_by_xid(hton, xid);
  return deferred_decision(xid, false) ? 0 : end_by_xid(xid, false);
}

}  // namespace

void end_recovered_commits() {
  if (!deferring.load()) return;
  auto d = deferred.lock();
  if (deferring.load()) end_deferred(*d);
}

uint64_t internal_xid(const std::string& key) {
  XID xid;
  return xid_of(key, &xid) ? xid.get_my_xid() : 0;
}

void install_xa_hooks(handlerton* hton) {
  hton->prepare = prepare;
  hton->recover = recover;
  hton->commit_by_xid = commit_by_xid;
  hton->rollback_by_xid = rollback_by_xid;
}

void forget_prepared_marker_if_unused() {
  if (!q4m::file_exists(kPreparedMarker)) return;
  for (const auto& table : q4m::TableRegistry::instance().open_tables())
    if (!table->prepared_parts().empty()) return;
  if (q4m::remove_file(kPreparedMarker).ok()) marker_made.store(false);
}

}  // namespace q4m_engine
