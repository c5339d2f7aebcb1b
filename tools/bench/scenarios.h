// The benchmark scenarios (after Q4M's t/05-multi*.t), each run against one
// queue backend on a fresh table, and the SELECT 1 ceiling.
//   multireader: preload M messages; N readers consume them all.
//   multirw:     each client inserts one, then consumes one (M in total).
//   multiwait:   K messages circulate (default N/4, Q4M's "semi-starvation"):
//                consume one, insert one, until M were consumed.
//   enqueue:     N clients insert M messages with multi-row INSERTs of --batch rows;
//                a scan reads them back afterwards (untimed) to verify them.
//   select1:     N clients run max(M, 50000) x SELECT 1 in total (the SQL-layer ceiling).
//   poll-empty:  the same with QUEUE's consume statement on an empty QUEUE table and
//                timeout 0: the statement's own cost with no message work (its ceiling).
// Transactions (is_transactional(); the InnoDB tables of txn_tables.h):
//   outbox:      N clients, M/N transactions each: an InnoDB order row and its message,
//                one COMMIT; afterwards every order row and every message is checked.
//   consume-txn: preload M messages; N clients consume them, each in a transaction with
//                its InnoDB result row; afterwards every result row is checked.
#pragma once
#include <string>
#include <vector>

#include "../common/db_conn.h"
#include "latency.h"
#include "options.h"
#include "queue_backend.h"
#include "server_sync.h"

namespace q4m::bench {

struct RunResult {
  std::string scenario;
  std::string engine;  // "queue", "innodb", or "server" for select1
  SyncMode sync = SyncMode::kNone;
  int concurrency = 0;
  uint64_t messages = 0;  // messages consumed (select1: queries run)
  double seconds = 0;
  double rate = 0;        // messages (select1: queries) per second
  LatencySummary consume; // time to obtain one message / run one SELECT 1
  LatencySummary insert;
  uint64_t empty_polls = 0;
  EngineCounters counters;       // engine counter changes during the timed part
  double syncs_per_message = -1; // the engine's sync counter / messages; -1 = n/a. Transactional
                                 // scenarios and a synced binary log add those syncs too
                                 // (sync_counter_names())
  double us_per_sync = -1;       // mean wall-clock µs of one sync (the disk's latency); -1 = n/a
  double sync_busy = -1;         // time spent syncing / the run's time (1.0: one sync always in flight)
  std::vector<double> repeat_rates;  // --repeat: the rate of every run of this configuration
  std::string verification;  // the ledger's findings
  bool verified = false;
  std::string error;
  bool ok() const { return verified && error.empty(); }
};

RunResult run_queue_scenario(const Options& opt, QueueBackend& backend, const ServerSync& server,
                             client::DbConn& admin, Scenario scenario, SyncMode sync, int concurrency);
inline constexpr const char* kSelect1Scenario = "select1";
inline constexpr const char* kEmptyPollScenario = "poll-empty";
inline constexpr const char* kEmptyPollTable = "q4m_bench_poll";

RunResult run_select1(const Options& opt, SyncMode sync, int concurrency);
// Creates an empty QUEUE table, polls it, drops it.
RunResult run_empty_poll(const Options& opt, client::DbConn& admin, SyncMode sync, int concurrency);

}  // namespace q4m::bench
