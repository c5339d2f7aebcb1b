// Fan-out: every message reaches K groups of consumers, each taking it exactly once
// (q4m-bench --scenarios fanout,fanout-tables --fanout K). M messages are preloaded (not
// timed), then the connections, spread over the groups (connection i in group i % K), drain
// every group; the rate counts deliveries (K per message). Three ways to do it:
//   fanout, QUEUE:         one table with K subscriptions (queue_subscribe), one copy of
//                          each row; group g consumes 'table@g<g>'.
//   fanout, InnoDB:        K SKIP LOCKED tables, each message inserted into all K in one
//                          transaction (the workaround on InnoDB).
//   fanout-tables, QUEUE:  the same workaround with K QUEUE tables.
// The ledger checks each (group, message) exactly once and that every table is empty after.
#pragma once
#include "options.h"
#include "scenarios.h"
#include "server_sync.h"

namespace q4m::bench {

RunResult run_fanout_scenario(const Options& opt, Engine engine, const ServerSync& server, client::DbConn& admin,
                              Scenario scenario, SyncMode sync, int concurrency);

}  // namespace q4m::bench
