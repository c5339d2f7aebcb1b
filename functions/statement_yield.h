// When a consumer's queue_wait() should give up early: DDL (ALTER, DROP, TRUNCATE, RENAME,
// LOCK TABLES ... WRITE) and FLUSH TABLES wait for the metadata locks and table instances of
// every table a statement opened, and `SELECT * FROM q WHERE queue_wait('q')` keeps `q` open
// for its whole wait. Without this the DDL, and every statement queued behind it, would
// wait for the consumer's timeout (60 s by default).
#pragma once
#include "core/table/consumer.h"

class THD;

namespace q4m_functions {

// A WaitYield for `thd`'s current statement: true once DDL or a flush waits for one of
// the tables it opened. Checked every 250 ms while the wait sleeps; the wait then returns 0
// (a timeout), the statement ends, and the consumer's next one waits for the DDL. A
// statement that opened no table (`SELECT queue_wait('q')`) holds no lock to give back:
// should_yield is then empty, and the wait needs no yield at all (see yield_or_null).
q4m::WaitYield statement_yield(THD* thd);
inline const q4m::WaitYield* yield_or_null(const q4m::WaitYield& y) { return y.should_yield ? &y : nullptr; }

}  // namespace q4m_functions
