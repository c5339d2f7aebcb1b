#define MYSQL_SERVER 1
#include <my_global.h>
#include <log.h>
#include <signal.h>
#include <strings.h>
#include <unistd.h>
#include <mysqld_error.h>
#include <mysql/plugin.h>

#include <chrono>
#include <cmath>

#include "core/table/background_sync.h"
#include "core/util/settings.h"
#include "engine/sysvars.h"

namespace q4m_engine {

namespace {

// Backing stores of the variables; the server writes them, update callbacks mirror
// them into q4m::settings() which the storage layer reads on each operation.
unsigned long sync_mode = static_cast<unsigned long>(q4m::SyncMode::kFdatasync);
char use_concurrent_compaction = 1;
unsigned long long concurrent_compaction_interval = 1ull << 20;
unsigned long long mmap_max = 1ull << 30;
unsigned int compact_removed_percent = 50;
unsigned long long compact_min_bytes = 16ull << 20;
unsigned long long snapshot_journal_rows = 4000000;
unsigned int commit_spin_us = 300;

// Same order as q4m::SyncMode.
const char* sync_mode_names[] = {"none", "fdatasync", "fsync", nullptr};
unsigned long crash_point = 0;
const char* crash_point_names[] = {"none",         "before_prepare",        "after_prepare", "before_commit",
                                   "after_commit", "before_commit_record", nullptr};
TYPELIB crash_point_typelib = {array_elements(crash_point_names) - 1, "crash_point_typelib", crash_point_names,
                               nullptr};
TYPELIB sync_mode_typelib = {array_elements(sync_mode_names) - 1, "sync_mode_typelib",
                             sync_mode_names, nullptr};

template <typename T>
T stored(void* var_ptr, const void* save) {
  T v = *static_cast<const T*>(save);
  *static_cast<T*>(var_ptr) = v;
  return v;
}

void update_sync_mode(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().sync_mode.store(static_cast<int>(stored<unsigned long>(var_ptr, save)));
}
void update_use_concurrent_compaction(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().use_concurrent_compaction.store(stored<char>(var_ptr, save) != 0);
}
void update_concurrent_compaction_interval(THD*, st_mysql_sys_var*, void* var_ptr,
                                           const void* save) {
  q4m::settings().concurrent_compaction_interval.store(
      stored<unsigned long long>(var_ptr, save));
}
void update_mmap_max(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().mmap_max.store(stored<unsigned long long>(var_ptr, save));
}
void update_compact_removed_percent(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().compaction_removed_percent.store(
      static_cast<int>(stored<unsigned int>(var_ptr, save)));
}
void update_snapshot_journal_rows(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().snapshot_journal_rows.store(stored<unsigned long long>(var_ptr, save));
}

void update_compact_min_bytes(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().compaction_min_file_bytes.store(stored<unsigned long long>(var_ptr, save));
}
void update_commit_spin_us(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  q4m::settings().commit_spin_us.store(stored<unsigned int>(var_ptr, save));
}

MYSQL_SYSVAR_ENUM(sync_mode, sync_mode, PLUGIN_VAR_RQCMDARG,
                  "How INSERT/DELETE/queue_end() wait for durability: fdatasync (default) or "
                  "fsync per group commit; none = write only (survives a server crash, not a "
                  "machine crash)",
                  nullptr, update_sync_mode, static_cast<unsigned long>(q4m::SyncMode::kFdatasync),
                  &sync_mode_typelib);
MYSQL_SYSVAR_BOOL(use_concurrent_compaction, use_concurrent_compaction, PLUGIN_VAR_RQCMDARG,
                  "Serve INSERTs while compaction copies rows", nullptr,
                  update_use_concurrent_compaction, 1);
MYSQL_SYSVAR_ULONGLONG(concurrent_compaction_interval, concurrent_compaction_interval,
                       PLUGIN_VAR_RQCMDARG,
                       "Bytes compaction copies between serving waiting writers", nullptr,
                       update_concurrent_compaction_interval, 1ull << 20, 4096, ULLONG_MAX, 0);
MYSQL_SYSVAR_ULONGLONG(mmap_max, mmap_max, PLUGIN_VAR_RQCMDARG,
                       "Accepted for compatibility with Q4M configurations; has no effect "
                       "(q4m reads data files with pread and maps nothing)", nullptr,
                       update_mmap_max, 1ull << 30, 0, ULLONG_MAX, 0);
MYSQL_SYSVAR_UINT(compact_removed_percent, compact_removed_percent, PLUGIN_VAR_RQCMDARG,
                  "Compact a table automatically when this percentage of its file is removed "
                  "rows (and the file is at least queue_compact_min_bytes)",
                  nullptr, update_compact_removed_percent, 50, 1, 100, 0);
MYSQL_THDVAR_DOUBLE(lease_timeout, PLUGIN_VAR_RQCMDARG,
                    "Seconds a consumer may own a row taken by queue_wait(); if it neither "
                    "ends nor aborts the row in time, the row goes back to the queue and the "
                    "consumer's next queue_end()/queue_wait() reports that the lease expired. "
                    "0 (default) = no lease, as in Q4M. Session and global",
                    nullptr, nullptr, 0.0, 0.0, kMaxLeaseSeconds, 0);
MYSQL_THDVAR_BOOL(sync_removals, PLUGIN_VAR_OPCMDARG,
                  "Whether a removal (queue_end(), the end of the owned row by the next "
                  "queue_wait(), DELETE) waits for the sync of queue_sync_mode. OFF: it is "
                  "written but not synced (an INSERT's sync covers it later), so a server crash "
                  "keeps it but a machine crash may bring the row back (at-least-once); INSERTs "
                  "are synced as before. ON (default). Session and global",
                  nullptr, nullptr, 1);
MYSQL_SYSVAR_ULONGLONG(compact_min_bytes, compact_min_bytes, PLUGIN_VAR_RQCMDARG,
                       "Smallest data file automatic compaction considers (bytes)", nullptr,
                       update_compact_min_bytes, 16ull << 20, 0, ULLONG_MAX, 0);
MYSQL_SYSVAR_ULONGLONG(snapshot_journal_rows, snapshot_journal_rows, PLUGIN_VAR_RQCMDARG,
                       "Rows removed from one QUEUE table that it keeps (in memory, about 60 bytes each) for "
                       "open consistent snapshots (START TRANSACTION WITH CONSISTENT SNAPSHOT, mariadb-dump "
                       "--single-transaction); past it the snapshots begun before fail to read the table "
                       "with an error, instead of reading it wrong",
                       nullptr, update_snapshot_journal_rows, 4000000, 1, ULLONG_MAX, 0);
MYSQL_SYSVAR_UINT(commit_spin_us, commit_spin_us, PLUGIN_VAR_RQCMDARG,
                  "Microseconds a statement queued behind another's group commit keeps its "
                  "CPU (yielding to runnable threads) before it sleeps; at most as many "
                  "statements spin at once as the server may use CPUs. 0 = sleep at once",
                  nullptr, update_commit_spin_us, 300, 0, 100000, 0);
// Test hooks stay inert on a production server: queue_debug_crash_point (a way to kill the
// server) takes effect only on a server started with --queue-debug-hooks=ON.
char binlog_redo = 1;
unsigned long long background_sync_ms = 1000;
// The background sync runs with the redo only: without it a commit's prepare syncs the file.
void apply_background_sync() {
  q4m::BackgroundSync::instance().set_interval_ms(binlog_redo ? background_sync_ms : 0);
}
void update_binlog_redo(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  stored<char>(var_ptr, save);
  apply_background_sync();
}
void update_background_sync_ms(THD*, st_mysql_sys_var*, void* var_ptr, const void* save) {
  stored<unsigned long long>(var_ptr, save);
  apply_background_sync();
}
MYSQL_SYSVAR_BOOL(binlog_redo, binlog_redo, PLUGIN_VAR_OPCMDARG,
                  "With the binary log on and sync_binlog=1: a QUEUE transaction's prepare is written without a "
                  "sync of its own and its records go into the binary log, which recovery redoes them from after "
                  "a power cut (docs/recovery.md). ON (default). OFF, or sync_binlog other than 1: the prepare is "
                  "synced",
                  nullptr, update_binlog_redo, 1);
MYSQL_SYSVAR_ULONGLONG(background_sync_ms, background_sync_ms, PLUGIN_VAR_RQCMDARG,
                       "With queue_binlog_redo ON, the binary log on and sync_binlog=1: every this many milliseconds each open "
                       "QUEUE table whose file has unsynced writes is synced (nothing on the commit path syncs "
                       "it then), which bounds the stretch of a file a crash leaves unsynced; a damaged chunk "
                       "before the last sync is then reported as corruption, not cut as a lost tail. 0 = off",
                       nullptr, update_background_sync_ms, 1000, 0, 3600ull * 1000, 0);

char debug_hooks = 0;
MYSQL_SYSVAR_BOOL(debug_hooks, debug_hooks, PLUGIN_VAR_OPCMDARG | PLUGIN_VAR_READONLY,
                  "For tests only, set at startup: enables the test hooks (queue_debug_crash_point). "
                  "OFF (default): they cannot be set and do nothing",
                  nullptr, nullptr, 0);
int check_crash_point(MYSQL_THD, st_mysql_sys_var*, void* save, st_mysql_value* value) {
  long long point = -1;
  if (value->value_type(value) == MYSQL_VALUE_TYPE_STRING) {
    char buf[64];
    int length = sizeof buf;
    const char* name = value->val_str(value, buf, &length);
    for (long long i = 0; name && crash_point_names[i]; i++)
      if (strcasecmp(name, crash_point_names[i]) == 0) point = i;
  } else {
    value->val_int(value, &point);
  }
  if (point < 0 || point >= static_cast<long long>(array_elements(crash_point_names) - 1)) return 1;  // ER_WRONG_VALUE_FOR_VAR
  *static_cast<unsigned long*>(save) = static_cast<unsigned long>(point);
  if (debug_hooks || point == 0) return 0;
  my_printf_error(ER_WRONG_VALUE_FOR_VAR,
                  "queue_debug_crash_point is a test hook (it kills the server): it can be set only on a "
                  "server started with --queue-debug-hooks=ON",
                  MYF(0));
  return 1;
}
MYSQL_SYSVAR_ENUM(debug_crash_point, crash_point, PLUGIN_VAR_RQCMDARG,
                  "For crash tests only, on a server started with --queue-debug-hooks=ON: the server kills "
                  "itself (SIGKILL, as kill -9) when a transaction reaches this point of QUEUE's two-phase "
                  "commit (before_prepare, after_prepare: its parts are durable; before_commit_record: the "
                  "coordinator has it, QUEUE's commit record is not written; before_commit: the coordinator "
                  "decided; after_commit). none (default)",
                  check_crash_point, nullptr, 0, &crash_point_typelib);
// Not a server variable (no SHOW VARIABLES, no SET): the mark of the ConnectionState this
// session belongs to. COM_RESET_CONNECTION and COM_CHANGE_USER put every session variable
// back to its default (0), which is how the engine learns that a pooled connection was
// reset (connection_state.cc).
MYSQL_THDVAR_ULONGLONG(session_mark, PLUGIN_VAR_NOSYSVAR | PLUGIN_VAR_NOCMDOPT | PLUGIN_VAR_READONLY,
                       "Internal: the engine's per-connection state mark", nullptr, nullptr, 0, 0, ULLONG_MAX, 0);

}  // namespace

st_mysql_sys_var* queue_system_variables[] = {
    MYSQL_SYSVAR(sync_mode),
    MYSQL_SYSVAR(use_concurrent_compaction),
    MYSQL_SYSVAR(concurrent_compaction_interval),
    MYSQL_SYSVAR(mmap_max),
    MYSQL_SYSVAR(compact_removed_percent),
    MYSQL_SYSVAR(compact_min_bytes),
    MYSQL_SYSVAR(lease_timeout),
    MYSQL_SYSVAR(sync_removals),
    MYSQL_SYSVAR(commit_spin_us),
    MYSQL_SYSVAR(snapshot_journal_rows),
    MYSQL_SYSVAR(session_mark),
    MYSQL_SYSVAR(binlog_redo),
    MYSQL_SYSVAR(background_sync_ms),
    MYSQL_SYSVAR(debug_hooks),
    MYSQL_SYSVAR(debug_crash_point),
    nullptr};

std::chrono::milliseconds session_lease(THD* thd) {
  // Rounded up, as queue_renew_lease() rounds: a tiny positive lease is 1 ms, not "no lease".
  const double seconds = THDVAR(thd, lease_timeout);
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

bool session_sync_removals(THD* thd) { return THDVAR(thd, sync_removals); }

void crash_at(CrashPoint point) {
  if (!debug_hooks || crash_point != static_cast<unsigned long>(point)) return;
  sql_print_information("QUEUE: queue_debug_crash_point=%s reached: killing the server", crash_point_names[crash_point]);
  kill(getpid(), SIGKILL);
}

uint64_t session_mark(THD* thd) { return THDVAR(thd, session_mark); }
void set_session_mark(THD* thd, uint64_t mark) { THDVAR(thd, session_mark) = mark; }

void apply_system_variables() {
  q4m::StorageSettings& s = q4m::settings();
  s.sync_mode.store(static_cast<int>(sync_mode));
  s.use_concurrent_compaction.store(use_concurrent_compaction != 0);
  s.concurrent_compaction_interval.store(concurrent_compaction_interval);
  s.mmap_max.store(mmap_max);
  s.compaction_removed_percent.store(static_cast<int>(compact_removed_percent));
  s.compaction_min_file_bytes.store(compact_min_bytes);
  s.commit_spin_us.store(commit_spin_us);
  s.snapshot_journal_rows.store(snapshot_journal_rows);
  // Where the redo applies (engine/binlog_statements.cc): elsewhere the prepares sync the file.
  q4m::BackgroundSync::instance().set_gate([] { return mysql_bin_log.is_open() && sync_binlog_period == 1; });
  apply_background_sync();
}

bool binlog_redo_enabled() { return binlog_redo != 0; }
bool debug_hooks_enabled() { return debug_hooks != 0; }

}  // namespace q4m_engine
