#include "scenarios.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "delivery_ledger.h"
#include "run_control.h"
#include "txn_tables.h"
#include "work_split.h"
#include "worker_steps.h"

namespace q4m::bench {

namespace {

void timed_insert(QueueSession& s, WorkerStats& st, uint64_t id) {
  Clock::time_point t0 = Clock::now();
  s.insert(id);
  Clock::time_point t1 = Clock::now();
  st.insert.add(t0, t1);
  st.last_progress = t1;
}

// One outbox transaction (order row, message, COMMIT), timed as one "put".
void timed_outbox(QueueSession& s, WorkerStats& st, uint64_t id) {
  Clock::time_point t0 = Clock::now();
  s.outbox(id);
  Clock::time_point t1 = Clock::now();
  st.insert.add(t0, t1);
  st.last_progress = t1;
}

// One multi-row INSERT, timed as one "put".
void timed_batch(QueueSession& s, WorkerStats& st, uint64_t first, uint64_t count) {
  Clock::time_point t0 = Clock::now();
  s.insert_batch(first, count);
  Clock::time_point t1 = Clock::now();
  st.insert.add(t0, t1);
  st.last_progress = t1;
}

// enqueue: every row the run inserted, read back by a plain scan (a SELECT without
// queue_wait() takes no row), into the ledger.
void read_back(QueueBackend& backend, client::DbConn& admin, DeliveryLedger* ledger) {
  const bool payload = backend.codec().payload().enabled();
  client::DbResult res = admin.query("SELECT v" + std::string(payload ? ", s" : "") + " FROM " + backend.table());
  Delivered d;
  while (MYSQL_ROW row = res.next()) {
    backend.codec().decode(row, res.lengths(), 0, &d);
    ledger->record(d.id, d.payload_ok);
  }
}

// The counters whose sum is a run's syncs: the engine's own; in a transaction InnoDB's too
// (its rows commit with the QUEUE's); the binary log's group commits when each is synced.
std::vector<std::string> sync_counter_names(const QueueBackend& backend, const ServerSync& server, Scenario scenario,
                                            SyncMode sync) {
  std::vector<std::string> names = {backend.sync_counter()};
  if (is_transactional(scenario) && names[0] != ServerSync::kInnodbSyncs) names.push_back(ServerSync::kInnodbSyncs);
  if (server.binlog_syncs(sync)) names.push_back(ServerSync::kBinlogSyncs);
  return names;
}

// `into` gains the counters of `more` it does not have yet.
void add_counters(EngineCounters* into, const EngineCounters& more) {
  for (const auto& c : more) {
    bool known = false;
    for (const auto& have : *into)
      if (have.first == c.first) known = true;
    if (!known) into->push_back(c);
  }
}

}  // namespace

RunResult run_queue_scenario(const Options& opt, QueueBackend& backend, const ServerSync& server,
                             client::DbConn& admin, Scenario scenario, SyncMode sync, int concurrency) {
  RunResult r;
  r.scenario = scenario_name(scenario);
  r.engine = engine_name(backend.engine());
  r.sync = sync;
  r.concurrency = concurrency;
  const uint64_t m = opt.messages;
  const int n = concurrency;
  uint64_t circulating = opt.circulating ? opt.circulating : std::max<uint64_t>(1, n / 4);
  circulating = std::min(circulating, m);

  const bool transactional = is_transactional(scenario);

  try {
    backend.recreate_table(admin);
    if (transactional) recreate_txn_tables(admin);
    if (scenario == Scenario::kMultireader || scenario == Scenario::kConsumeTxn) backend.preload(admin, 0, m);
    if (scenario == Scenario::kMultiwait) backend.preload(admin, 0, circulating);

    // --hold-read-view: opened after the preload, kept until the workers are done.
    std::optional<client::DbConn> read_view;
    if (opt.hold_read_view) {
      read_view.emplace(worker_params(opt));
      read_view->exec("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ");
      read_view->exec("START TRANSACTION WITH CONSISTENT SNAPSHOT");
    }
    DeliveryLedger ledger(m);
    RunControl ctl(opt.run_timeout_s);
    std::atomic<uint64_t> next_id{circulating};  // multiwait: the next id to enqueue
    std::atomic<uint64_t> committed{0};          // outbox: transactions committed
    WorkersOutcome out;
    auto counters = [&] {
      EngineCounters c = backend.counters(admin);
      if (transactional || server.binlog()) add_counters(&c, ServerSync::counters(admin));
      return c;
    };
    {
      std::vector<client::DbConn> conns = open_connections(opt, n);
      std::vector<std::unique_ptr<QueueSession>> sessions;
      for (auto& c : conns) sessions.push_back(backend.open_session(&c, transactional));
      auto all_received = [&] { return ledger.received() >= m; };
      const EngineCounters before = counters();

      out = run_workers(n, ctl, [&](int i, WorkerStats& st) {
        QueueSession& s = *sessions[i];
        Delivered d;
        switch (scenario) {
          case Scenario::kMultireader:
            while (!all_received() && take_one(s, ctl, st, all_received, &d)) ledger.record(d.id, d.payload_ok);
            break;
          case Scenario::kMultirw: {
            const uint64_t first = share_start(m, n, i), count = share(m, n, i);
            for (uint64_t id = first; id < first + count; ++id) {
              timed_insert(s, st, id);
              if (!take_one(s, ctl, st, [] { return false; }, &d)) break;
              ledger.record(d.id, d.payload_ok);
            }
            break;
          }
          case Scenario::kMultiwait:
            while (!all_received() && take_one(s, ctl, st, all_received, &d)) {
              ledger.record(d.id, d.payload_ok);
              uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
              if (id < m) timed_insert(s, st, id);
            }
            break;
          case Scenario::kEnqueue: {
            const uint64_t first = share_start(m, n, i), end = first + share(m, n, i);
            for (uint64_t id = first; id < end && !ctl.should_stop(); id += opt.batch)
              timed_batch(s, st, id, std::min(opt.batch, end - id));
            break;
          }
          case Scenario::kOutbox: {
            const uint64_t first = share_start(m, n, i), end = first + share(m, n, i);
            for (uint64_t id = first; id < end && !ctl.should_stop(); ++id) {
              timed_outbox(s, st, id);
              committed.fetch_add(1, std::memory_order_relaxed);
            }
            break;
          }
          case Scenario::kConsumeTxn:  // recorded once committed
            while (!all_received() && take_one(s, ctl, st, all_received, &d, true)) ledger.record(d.id, d.payload_ok);
            break;
          case Scenario::kFanout:
          case Scenario::kFanoutTables:
            throw client::DbError(0, "fan-out runs in run_fanout_scenario (fanout.h)");
        }
        finish_session(s, st);
        st.empty_polls = s.empty_polls() - st.final_empty_polls;
      });
      r.counters = counter_delta(before, counters());
    }  // sessions end and connections close before the table is checked
    read_view.reset();  // its disconnect ends the transaction
    uint64_t rows_left = 0;
    std::string txn_problem;  // what the InnoDB rows of a transactional scenario lack
    if (scenario == Scenario::kEnqueue || scenario == Scenario::kOutbox) {
      read_back(backend, admin, &ledger);  // the rows stay: the next run recreates the table
    } else {
      rows_left = backend.rows_left(admin);
    }
    if (scenario == Scenario::kOutbox) {
      txn_problem = check_txn_table(admin, kOrdersTable, m);
      if (committed.load() != m)
        txn_problem += (txn_problem.empty() ? "" : ", ") + std::string("COMMITTED ") +
                       std::to_string(committed.load()) + "/" + std::to_string(m);
    }
    if (scenario == Scenario::kConsumeTxn) txn_problem = check_txn_table(admin, kResultsTable, m);
    r.seconds = out.seconds;
    r.consume = out.merged.consume.summarize();
    r.insert = out.merged.insert.summarize();
    r.empty_polls = out.merged.empty_polls;
    // outbox: a message counts once its transaction committed (the read-back checks it is there)
    r.messages = scenario == Scenario::kOutbox ? committed.load() : ledger.received();
    r.rate = r.seconds > 0 ? static_cast<double>(r.messages) / r.seconds : 0;
    uint64_t syncs = 0, all_syncs = 0, sync_us = 0;
    bool counted = false, timed = false;
    const std::vector<std::string> sync_names = sync_counter_names(backend, server, scenario, sync);
    for (const auto& [name, value] : r.counters) {
      if (name == backend.sync_counter()) {
        syncs = value;
        counted = true;
      }
      if (std::find(sync_names.begin(), sync_names.end(), name) != sync_names.end()) all_syncs += value;
      if (backend.sync_time_counter() && name == backend.sync_time_counter()) {
        sync_us = value;
        timed = true;
      }
    }
    if (counted && r.messages) r.syncs_per_message = static_cast<double>(all_syncs) / static_cast<double>(r.messages);
    if (timed && syncs) r.us_per_sync = static_cast<double>(sync_us) / static_cast<double>(syncs);
    if (timed && r.seconds > 0) r.sync_busy = static_cast<double>(sync_us) / 1e6 / r.seconds;
    r.error = ctl.error();
    Verification v = ledger.verify(rows_left);
    r.verified = v.ok() && txn_problem.empty();
    r.verification = v.describe() + (txn_problem.empty() ? "" : ", " + txn_problem);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

namespace {

// A ceiling's result before it runs: a rate of the server itself, not of a queue.
RunResult ceiling_result(const char* scenario, SyncMode sync, int concurrency) {
  RunResult r;
  r.scenario = scenario;
  r.engine = "server";
  r.sync = sync;
  r.concurrency = concurrency;
  return r;
}

// Runs `sql` max(M, 50000) times in total on `concurrency` connections; `check`
// validates each result (throws on a wrong one). Nothing is consumed, so the run is
// "verified" when every query ran.
template <typename Check>
RunResult run_query_ceiling(const Options& opt, SyncMode sync, int concurrency, const char* scenario,
                            const std::string& sql, Check check) {
  RunResult r = ceiling_result(scenario, sync, concurrency);
  // At least 50000 queries: a ceiling measured over a few milliseconds is noise.
  const uint64_t m = std::max<uint64_t>(opt.messages, 50000);
  try {
    std::vector<client::DbConn> conns = open_connections(opt, concurrency);
    std::vector<std::unique_ptr<client::DbStatement>> statements;
    for (auto& c : conns) statements.push_back(std::make_unique<client::DbStatement>(c, sql, opt.protocol));
    RunControl ctl(opt.run_timeout_s);
    WorkersOutcome out = run_workers(concurrency, ctl, [&](int i, WorkerStats& st) {
      const uint64_t count = share(m, concurrency, i);
      client::DbStatement& statement = *statements[i];
      for (uint64_t k = 0; k < count && !ctl.should_stop(); ++k) {
        Clock::time_point t0 = Clock::now();
        statement.run({});
        check(statement);
        Clock::time_point t1 = Clock::now();
        st.consume.add(t0, t1);
        st.last_progress = t1;
      }
    });
    r.seconds = out.seconds;
    r.consume = out.merged.consume.summarize();
    r.messages = r.consume.count;
    r.rate = r.seconds > 0 ? static_cast<double>(r.messages) / r.seconds : 0;
    r.error = ctl.error();
    r.verified = r.messages == m;
    r.verification = std::to_string(r.messages) + "/" + std::to_string(m) + " queries";
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace

RunResult run_select1(const Options& opt, SyncMode sync, int concurrency) {
  return run_query_ceiling(opt, sync, concurrency, kSelect1Scenario, "SELECT 1", [](client::DbStatement& res) {
    if (!res.next() || !res.row()[0] || res.row()[0][0] != '1') throw client::DbError(0, "SELECT 1 returned no 1");
  });
}

RunResult run_empty_poll(const Options& opt, client::DbConn& admin, SyncMode sync, int concurrency) {
  const std::string table = kEmptyPollTable;
  try {
    admin.exec("DROP TABLE IF EXISTS " + table);
    admin.exec("CREATE TABLE " + table + " (v BIGINT UNSIGNED NOT NULL) ENGINE=QUEUE");
  } catch (const std::exception& e) {
    RunResult r = ceiling_result(kEmptyPollScenario, sync, concurrency);
    r.error = e.what();
    return r;
  }
  const std::string sql = "SELECT * FROM " + table + " WHERE queue_wait('" + table + "', 0)";
  RunResult r = run_query_ceiling(opt, sync, concurrency, kEmptyPollScenario, sql,
                                  [](client::DbStatement& res) {
                                    if (res.next()) throw client::DbError(0, "the empty queue returned a row");
                                  });
  try {
    admin.exec("DROP TABLE IF EXISTS " + table);
  } catch (const std::exception& e) {
    if (r.error.empty()) r.error = e.what();
  }
  return r;
}

}  // namespace q4m::bench
