// The engine's own connection for MESSAGE_TTL when the binary log is on (q4m::ExpiryLog).
//
// A table's timer claims its rows past their TTL (no consumer gets them any more); the
// removal is a transaction of its own, so that the binary log has it, in its place among the
// other commits, as the removal of those rows by id. A thread of the engine runs it over a
// local connection (MariaDB's SQL service, mysql_real_connect_local: a session with every
// privilege): SET @queue_expired = queue_expire('<db>', '<table>'), which commits two-phase
// with the log like a consumption and logs queue_apply_removal for its rows. A failure
// leaves the rows claimed again for the next try, a second later.
//
// A replica expires nothing itself (expires() false while the server is read-only or a
// replica applier runs): the removals its primary logged are its expiries, so it holds
// the primary's rows at every point of the log. Once promoted (read_only off, applier
// stopped) its tables' timers expire again within about a second.
#pragma once
#include <cstddef>

namespace q4m_engine {

// One queue_expire() statement removes at most this many rows (its statement in the binary
// log names each: about 25 bytes a row); the session runs it again while it removes as many.
constexpr size_t kMaxExpiredRowsPerStatement = 10000;

// At the engine's init: installs the ExpiryLog and starts its thread.
void start_expiry_session();
// At the server's shutdown, once its connections are closed and before the binary log is
// (handlerton pre_shutdown; closing the session's connection later crashed the server in the
// binary log's close_connection): ends the thread and its connection, and expiry stops.
void stop_expiry_session();
// At the engine's deinit, once its tables are closed: stops it (if not yet) and uninstalls it.
void forget_expiry_session();

}  // namespace q4m_engine
