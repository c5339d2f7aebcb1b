// Crash recovery with the binary log off: MariaDB's tc.log, read the way its recovery means to.
//
// With the binary log off, MariaDB coordinates a transaction of several engines with tc.log: a
// transaction is committed once its xid is synced there (before any engine commits), and the
// engines' commit records may stay unsynced (InnoDB leaves its own for the coordinator, as with
// the binary log). At the next start TC_LOG_MMAP::recover() collects the logged xids and hands
// them to ha_recover(), but 10.11's ha_recover() uses that list only when given a MEM_ROOT,
// which tc.log does not pass: every prepared transaction is rolled back, committed or not
// (sql/log.cc, sql/handler.cc xarecover_handlerton). A crash after COMMIT's decision then keeps
// the half of each engine whose commit record happened to be durable and rolls back the other.
//
// QUEUE is loaded at startup (plugin-load-add: the only way it gets two-phase commit with the
// binary log off). Its init reads tc.log, if a crash left one. The server's recovery then asks
// every engine for its prepared transactions, QUEUE before InnoDB (10.11.18 walks the engines in
// its plugin hash's order; test_transaction_crash.py checks it): at that first call QUEUE commits,
// in every engine, the prepared transactions tc.log logged, so the server's recovery rolls back
// only the ones it did not log, which is its documented intent.
#pragma once
#include <cstdint>

struct handlerton;

namespace q4m_engine {

// At engine init, binary log off: reads the xids a crashed run's tc.log logged as committed.
void read_tc_log();

// At the server's first recover() call: commits those xids in the other engines holding them
// prepared (once).
void commit_logged_elsewhere(handlerton* self);

// True if the crashed run's tc.log logged this server xid as committed.
bool tc_log_committed(uint64_t my_xid);

// Once per server run, before the first prepare: syncs tc.log, so the recovery's clearing of the
// old xids is durable before new ones are logged (xids restart at every start: an old one left on
// disk could pass for a new transaction's after the next crash).
void sync_tc_log_once();

}  // namespace q4m_engine
