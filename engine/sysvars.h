// Server variables (queue_*) mapped onto q4m::settings() (storage/settings.h).
#pragma once

#include <chrono>
#include <cstdint>

class THD;
struct st_mysql_sys_var;

namespace q4m_engine {

extern st_mysql_sys_var* queue_system_variables[];

// Copies the variables' current values (command line / my.cnf) into q4m::settings().
void apply_system_variables();

// The longest lease (queue_lease_timeout, queue_renew_lease()): a year.
constexpr double kMaxLeaseSeconds = 365.0 * 24 * 3600;

// queue_lease_timeout of this session (0 = no lease), for Consumer::set_lease.
std::chrono::milliseconds session_lease(THD* thd);

// queue_sync_removals of this session, for Consumer::set_sync_removals.
bool session_sync_removals(THD* thd);

// queue_binlog_redo: prepares the binary log coordinates are redone from it (core/table/redo.h).
bool binlog_redo_enabled();
// --queue-debug-hooks=ON (read-only): the tests' hooks may act.
bool debug_hooks_enabled();

// queue_debug_crash_point: the points of two-phase commit a crash test can stop the server at.
// kBeforeCommitRecord: in commit_ordered, once the coordinator (the binary log: written and
// synced) has the transaction and before QUEUE queues its part's commit record.
enum class CrashPoint : unsigned long {
  kNone,
  kBeforePrepare,
  kAfterPrepare,
  kBeforeCommit,
  kAfterCommit,
  kBeforeCommitRecord
};
void crash_at(CrashPoint point);  // kills the server if queue_debug_crash_point names `point`

// A hidden session variable that COM_RESET_CONNECTION / COM_CHANGE_USER set back to 0.
// Own thread only (reading a session variable may set up the session's copy).
uint64_t session_mark(THD* thd);
void set_session_mark(THD* thd, uint64_t mark);

}  // namespace q4m_engine
