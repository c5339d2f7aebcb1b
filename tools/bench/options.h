// Command-line options of q4m-bench.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/db_conn.h"
#include "../common/db_statement.h"

namespace q4m::bench {

enum class Engine { kQueue, kInnodb };
enum class Scenario { kMultireader, kMultirw, kMultiwait, kEnqueue, kOutbox, kConsumeTxn, kFanout, kFanoutTables };
// outbox and consume-txn: each message moves in a transaction with an InnoDB row.
bool is_transactional(Scenario s);
// fanout and fanout-tables: every message reaches several consumer groups (fanout.h).
bool is_fanout(Scenario s);
// kDurableInserts: durable INSERTs, removals written without their own sync
// (queue_sync_removals=OFF); InnoDB has no such split and runs as in kDurable.
enum class SyncMode { kNone, kDurable, kDurableInserts };
// --binlog: the server's binary log must be on / off (a startup setting: the tool only checks
// it; scripts/bench.sh starts its server accordingly). kAny: the server as it is.
enum class BinlogRequirement { kAny, kOn, kOff };

const char* engine_name(Engine e);
const char* scenario_name(Scenario s);
const char* sync_name(SyncMode s);

struct Options {
  client::ConnParams conn;
  uint64_t messages = 100000;
  std::vector<int> concurrency = {4};
  uint32_t payload = 0;     // bytes per message (the maximum with var_length)
  bool var_length = false;  // Q4M's VAR_LENGTH: length uniform in [0, payload)
  std::vector<SyncMode> sync = {SyncMode::kNone};
  // How every timed statement travels (queues and ceilings alike, so ratios compare like
  // with like): the text protocol, or server-side prepared statements.
  client::Protocol protocol = client::Protocol::kText;
  // An extra connection holds an InnoDB read view (an idle REPEATABLE READ transaction, e.g. a
  // report or a forgotten BEGIN) through every queue run: InnoDB cannot purge what it deletes.
  bool hold_read_view = false;
  std::vector<Engine> engines = {Engine::kQueue, Engine::kInnodb};
  // The transactional scenarios are asked for by name (--scenarios): they need QUEUE's
  // two-phase commit, so a server that loaded the plugin at startup.
  std::vector<Scenario> scenarios = {Scenario::kMultireader, Scenario::kMultirw, Scenario::kMultiwait,
                                     Scenario::kEnqueue};
  BinlogRequirement binlog = BinlogRequirement::kAny;
  uint64_t batch = 100;  // enqueue: rows per INSERT statement
  uint64_t consume_batch = 1;  // multireader, multiwait: messages taken per consume statement
  std::string queue_table_options;  // appended to the QUEUE table's CREATE TABLE (e.g. DEDUP_COLUMN='v')
  bool select1 = true;
  bool empty_poll = true;  // the consume statement on an empty QUEUE table (needs the QUEUE engine)
  // multiwait: messages in circulation; 0 = concurrency/4 (at least 1), as Q4M's multiwait.
  uint64_t circulating = 0;
  // fanout, fanout-tables: how many groups of consumers each message reaches (fanout.h).
  unsigned fanout = 3;
  double wait_timeout_s = 1.0;  // queue_wait() timeout; also how fast idle readers notice the end
  // QUEUE consumes by receipt (queue_receive with this lease, queue_end_receipt) instead of
  // owner mode; 0 = owner mode (queue_wait, queue_end).
  double receipts_lease_s = 0;
  uint32_t poll_sleep_us = 1000;  // InnoDB: longest back-off sleep after empty polls (0 = never sleep)
  unsigned run_timeout_s = 600; // a run that takes longer fails (engine hang)
  int repeat = 1;  // runs per configuration; the median is reported
  bool json = false;
  std::string json_out;  // also write the JSON document to this file
  bool keep_tables = false;
};

// Parses argv; prints usage and exits on --help or a bad option.
Options parse_options(int argc, char** argv);

}  // namespace q4m::bench
