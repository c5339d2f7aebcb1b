// When a consumer's queue_wait() should give up early: DDL (ALTER, DROP, TRUNCATE, RENAME,
// LOCK TABLES ... WRITE) and FLUSH TABLES wait for the metadata locks and table instances of
// every table a statement opened, and `SELECT * FROM q WHERE queue_wait('q')` keeps `q` open
// for its whole wait. Without this the DDL, and every statement queued behind it, would
// wait for the consumer's timeout (60 s by default).
#pragma once
#include "../storage/consumer.h"

class THD;

namespace q4m_functions {

// A WaitYield for `thd`'s current statement: true once DDL or a flush waits for one of
// the tables it opened. Checked every 250 ms while the wait sleeps; the wait then returns 0
// (a timeout), the statement ends, and the consumer's next one waits for the DDL.
q4m::WaitYield statement_yield(THD* thd);

}  // namespace q4m_functions
