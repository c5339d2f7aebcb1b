#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace q4m::bench {

const char* engine_name(Engine e) { return e == Engine::kQueue ? "queue" : "innodb"; }

const char* scenario_name(Scenario s) {
  switch (s) {
    case Scenario::kMultireader: return "multireader";
    case Scenario::kMultirw: return "multirw";
    case Scenario::kMultiwait: return "multiwait";
    case Scenario::kEnqueue: return "enqueue";
    case Scenario::kOutbox: return "outbox";
    case Scenario::kConsumeTxn: return "consume-txn";
    case Scenario::kFanout: return "fanout";
    case Scenario::kFanoutTables: return "fanout-tables";
  }
  return "?";
}

bool is_transactional(Scenario s) { return s == Scenario::kOutbox || s == Scenario::kConsumeTxn; }
bool is_fanout(Scenario s) { return s == Scenario::kFanout || s == Scenario::kFanoutTables; }

const char* sync_name(SyncMode s) {
  switch (s) {
    case SyncMode::kNone: return "none";
    case SyncMode::kDurable: return "durable";
    case SyncMode::kDurableInserts: return "durable-inserts";
  }
  return "?";
}

namespace {

const char kUsage[] = R"(usage: q4m-bench [options]
Compares the QUEUE engine with an InnoDB SKIP LOCKED queue and the SELECT 1 ceiling.
Every run verifies exactly-once delivery; a failed verification exits with status 1.

  --messages N          messages per run (default 100000)
  --concurrency LIST    client connections, e.g. 1,4,16,64 (default 4)
  --payload BYTES       payload bytes per message (default 0: id column only)
  --var-length          payload length uniform in [0, BYTES), like Q4M's VAR_LENGTH
  --sync LIST           none,durable,durable-inserts (default none): none =
                        queue_sync_mode=none, innodb_flush_log_at_trx_commit=2 and
                        (binary log on) sync_binlog=0; durable = fdatasync, =1 and
                        sync_binlog=1; durable-inserts = fdatasync with
                        queue_sync_removals=OFF (InnoDB as in durable: it cannot
                        keep inserts through a power cut without syncing deletes too)
  --protocol P          text (default) or prepared: every timed statement (queue,
                        InnoDB and ceilings) as COM_QUERY text or as a server-side
                        prepared statement executed with parameters (binary protocol)
  --queue-options TEXT  table options for the QUEUE table, appended to its CREATE TABLE
                        (e.g. "DEDUP_COLUMN='v'": column v holds the message id)
  --hold-read-view      another connection holds an InnoDB read view (START TRANSACTION
                        WITH CONSISTENT SNAPSHOT) during each queue run, so purge
                        cannot remove what the run deletes (a long report, an idle BEGIN)
  --engines LIST        queue,innodb (default both)
  --scenarios LIST      multireader,multirw,multiwait,enqueue,select1,poll-empty,
                        outbox,consume-txn (default: all but outbox and consume-txn):
                        enqueue = multi-row INSERTs only, read back after; select1 =
                        SELECT 1 (the SQL-layer ceiling); poll-empty = the QUEUE consume
                        statement on an empty table, timeout 0 (its ceiling).
                        Transactions (autocommit=0, one COMMIT each): outbox = an InnoDB
                        order row + its message; consume-txn = take a preloaded message,
                        an InnoDB result row, end it. QUEUE needs two-phase commit: a
                        server that loaded ha_queue at startup (--plugin-load-add)
                        Fan-out (fanout.h): fanout = M messages preloaded, each taken
                        once by every one of K consumer groups (--fanout K): QUEUE one
                        table with K subscriptions, InnoDB K tables filled by one
                        transaction; fanout-tables = QUEUE's K tables filled so
  --binlog on|off       require the server's binary log on / off (a startup setting,
                        checked, not changed: scripts/bench.sh starts its server with
                        it); default: the server as it is. Reported either way
  --circulating N       multiwait: messages in circulation (default concurrency/4)
  --fanout K            fanout, fanout-tables: consumer groups (default 3, 2..16)
  --batch N             enqueue: rows per INSERT statement (default 100)
  --consume-batch N     multireader, multiwait: messages a consumer takes per statement
                        (default 1). QUEUE: queue_wait_batch(t, N, timeout), acked by the
                        next one; InnoDB: LIMIT N ... SKIP LOCKED, one DELETE, one COMMIT
  --wait-timeout SEC    queue_wait() timeout (default 1)
  --receipts LEASE      QUEUE consumes by receipt instead of owner mode: SELECT *,
                        queue_receipt() ... WHERE queue_receive(t, LEASE, N, timeout), and
                        SELECT queue_end_receipt(t, ?) before the next one (in consume-txn:
                        inside the transaction); N = --consume-batch
  --poll-sleep-us N     InnoDB: after an empty poll retry at once, then back off
                        50 us doubling up to N (default 1000; 0 = never sleep)
  --run-timeout SEC     fail a run that takes longer (default 600)
  --repeat N            run each configuration N times (interleaved), report the median
  --socket PATH --host H --port P --user U --password PW --db DB
  --json                machine-readable output on stdout (instead of the tables)
  --json-out PATH       tables on stdout and the JSON document written to PATH
  --keep-tables         do not drop the benchmark tables at the end
)";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "q4m-bench: %s\n\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  if (out.empty()) usage_error("empty list: '" + s + "'");
  return out;
}

uint64_t parse_u64(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || v[0] == '-') usage_error(opt + ": not a number: '" + v + "'");
  return n;
}

double parse_seconds(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(d >= 0)) usage_error(opt + ": not a number of seconds: '" + v + "'");
  return d;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string val;
    bool has_inline = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    auto value = [&]() -> std::string {
      if (has_inline) return val;
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--messages") {
      o.messages = parse_u64(arg, value());
      if (o.messages == 0) usage_error("--messages must be > 0");
    } else if (arg == "--concurrency") {
      o.concurrency.clear();
      for (auto& c : split_list(value())) {
        uint64_t n = parse_u64(arg, c);
        if (n == 0 || n > 4096) usage_error("--concurrency: out of range: " + c);
        o.concurrency.push_back(static_cast<int>(n));
      }
    } else if (arg == "--payload") {
      uint64_t n = parse_u64(arg, value());
      if (n > (16u << 20)) usage_error("--payload: at most 16 MiB");
      o.payload = static_cast<uint32_t>(n);
    } else if (arg == "--var-length") {
      o.var_length = true;
    } else if (arg == "--sync") {
      o.sync.clear();
      for (auto& s : split_list(value())) {
        if (s == "none") o.sync.push_back(SyncMode::kNone);
        else if (s == "durable") o.sync.push_back(SyncMode::kDurable);
        else if (s == "durable-inserts") o.sync.push_back(SyncMode::kDurableInserts);
        else usage_error("--sync: expected none, durable or durable-inserts, got '" + s + "'");
      }
    } else if (arg == "--protocol") {
      std::string p = value();
      if (p == "text") o.protocol = client::Protocol::kText;
      else if (p == "prepared") o.protocol = client::Protocol::kPrepared;
      else usage_error("--protocol: expected text or prepared, got '" + p + "'");
    } else if (arg == "--queue-options") {
      o.queue_table_options = value();
    } else if (arg == "--hold-read-view") {
      o.hold_read_view = true;
    } else if (arg == "--engines") {
      o.engines.clear();
      for (auto& e : split_list(value())) {
        if (e == "queue") o.engines.push_back(Engine::kQueue);
        else if (e == "innodb") o.engines.push_back(Engine::kInnodb);
        else usage_error("--engines: expected queue or innodb, got '" + e + "'");
      }
    } else if (arg == "--scenarios") {
      o.scenarios.clear();
      o.select1 = false;
      o.empty_poll = false;
      for (auto& s : split_list(value())) {
        if (s == "multireader") o.scenarios.push_back(Scenario::kMultireader);
        else if (s == "multirw") o.scenarios.push_back(Scenario::kMultirw);
        else if (s == "multiwait") o.scenarios.push_back(Scenario::kMultiwait);
        else if (s == "enqueue") o.scenarios.push_back(Scenario::kEnqueue);
        else if (s == "outbox") o.scenarios.push_back(Scenario::kOutbox);
        else if (s == "consume-txn") o.scenarios.push_back(Scenario::kConsumeTxn);
        else if (s == "fanout") o.scenarios.push_back(Scenario::kFanout);
        else if (s == "fanout-tables") o.scenarios.push_back(Scenario::kFanoutTables);
        else if (s == "select1") o.select1 = true;
        else if (s == "poll-empty") o.empty_poll = true;
        else usage_error("--scenarios: unknown scenario '" + s + "'");
      }
    } else if (arg == "--binlog") {
      std::string b = value();
      if (b == "on") o.binlog = BinlogRequirement::kOn;
      else if (b == "off") o.binlog = BinlogRequirement::kOff;
      else usage_error("--binlog: expected on or off, got '" + b + "'");
    } else if (arg == "--batch") {
      o.batch = parse_u64(arg, value());
      if (o.batch == 0 || o.batch > 10000) usage_error("--batch: 1..10000");
    } else if (arg == "--consume-batch") {
      o.consume_batch = parse_u64(arg, value());
      if (o.consume_batch == 0 || o.consume_batch > 10000) usage_error("--consume-batch: 1..10000");
    } else if (arg == "--fanout") {
      const uint64_t k = parse_u64(arg, value());
      if (k < 2 || k > 16) usage_error("--fanout: 2..16 consumer groups");
      o.fanout = static_cast<unsigned>(k);
    } else if (arg == "--circulating") {
      o.circulating = parse_u64(arg, value());
    } else if (arg == "--receipts") {
      const std::string v = value();
      o.receipts_lease_s = std::atof(v.c_str());
      if (!(o.receipts_lease_s > 0)) usage_error("--receipts: expected a lease in seconds > 0, got '" + v + "'");
    } else if (arg == "--wait-timeout") {
      o.wait_timeout_s = parse_seconds(arg, value());
    } else if (arg == "--poll-sleep-us") {
      o.poll_sleep_us = static_cast<uint32_t>(parse_u64(arg, value()));
    } else if (arg == "--run-timeout") {
      o.run_timeout_s = static_cast<unsigned>(parse_u64(arg, value()));
    } else if (arg == "--socket") {
      o.conn.socket = value();
    } else if (arg == "--host") {
      o.conn.host = value();
    } else if (arg == "--port") {
      o.conn.port = static_cast<unsigned>(parse_u64(arg, value()));
    } else if (arg == "--user") {
      o.conn.user = value();
    } else if (arg == "--password") {
      o.conn.password = value();
    } else if (arg == "--db") {
      o.conn.db = value();
    } else if (arg == "--repeat") {
      uint64_t n = parse_u64(arg, value());
      if (n == 0 || n > 100) usage_error("--repeat: 1..100");
      o.repeat = static_cast<int>(n);
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--json-out") {
      o.json_out = value();
    } else if (arg == "--keep-tables") {
      o.keep_tables = true;
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  if (o.conn.db.empty()) o.conn.db = "q4m_bench";
  // multirw: each client consumes exactly as many messages as it inserts, so messages one
  // client holds in its batch may be the ones another client waits for, forever. The
  // transactional scenarios move one message per transaction.
  for (Scenario sc : o.scenarios)
    if (o.consume_batch > 1 && (sc == Scenario::kMultirw || is_transactional(sc) || is_fanout(sc)))
      usage_error(std::string("--consume-batch applies to multireader and multiwait; leave ") + scenario_name(sc) +
                  " out of --scenarios");
  for (Scenario sc : o.scenarios)
    if (o.receipts_lease_s > 0 && is_fanout(sc))
      usage_error(std::string("--receipts does not apply to ") + scenario_name(sc) + ": leave it out of --scenarios");
  return o;
}

}  // namespace q4m::bench
