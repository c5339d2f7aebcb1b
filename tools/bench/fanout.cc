#include "fanout.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "delivery_ledger.h"
#include "payload.h"
#include "worker_steps.h"

namespace q4m::bench {

namespace {

constexpr const char* kFanoutTable = "q4m_bench_fanout";
constexpr uint64_t kRowsPerTransaction = 1000;  // the workaround's preload: K INSERTs, one COMMIT

std::string group_name(unsigned g) { return "g" + std::to_string(g); }

// The K places a message goes to: subscriptions of one QUEUE table, or K tables.
class FanoutTarget {
 public:
  FanoutTarget(const Options& opt, Engine engine, bool subscriptions) : subscriptions_(subscriptions) {
    PayloadSpec payload(opt.payload, opt.var_length);
    for (unsigned g = 0; g < opt.fanout; ++g) {
      const std::string table = subscriptions ? kFanoutTable : std::string(kFanoutTable) + "_" + group_name(g);
      groups_.push_back(engine == Engine::kQueue
                            ? make_queue_engine_backend(opt.queue_table_options, payload, opt.wait_timeout_s, 1,
                                                        opt.protocol, 0, table, subscriptions ? group_name(g) : "")
                            : make_innodb_backend(payload, opt.poll_sleep_us, 1, opt.protocol, table));
    }
  }

  // Empty tables (and the subscriptions, made before the preload: each starts at the next row).
  void recreate(client::DbConn& admin) {
    drop(admin);
    if (subscriptions_) {
      groups_[0]->recreate_table(admin);
      for (unsigned g = 0; g < groups_.size(); ++g)
        admin.exec("SELECT queue_subscribe('" + groups_[0]->table() + "', '" + group_name(g) + "')");
      return;
    }
    for (auto& b : groups_) b->recreate_table(admin);
  }

  // Messages [0, m): one INSERT into the table, or one transaction per kRowsPerTransaction
  // rows with an INSERT into each of the K tables.
  void preload(client::DbConn& admin, uint64_t m) {
    if (subscriptions_) {
      groups_[0]->preload(admin, 0, m);
      return;
    }
    for (uint64_t first = 0; first < m; first += kRowsPerTransaction) {
      const uint64_t count = std::min(kRowsPerTransaction, m - first);
      admin.exec("BEGIN");
      for (auto& b : groups_) b->preload(admin, first, count);
      admin.exec("COMMIT");
    }
  }

  void apply_sync(client::DbConn& admin, SyncMode sync) {
    for (auto& b : groups_) b->apply_sync(admin, sync);
  }
  void restore_globals(client::DbConn& admin) {  // in reverse: the first remembered the server's
    for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) (*it)->restore_globals(admin);
  }

  QueueBackend& group(unsigned g) { return *groups_[g]; }
  unsigned size() const { return static_cast<unsigned>(groups_.size()); }

  uint64_t rows_left(client::DbConn& admin) {
    if (subscriptions_) return groups_[0]->rows_left(admin);
    uint64_t n = 0;
    for (auto& b : groups_) n += b->rows_left(admin);
    return n;
  }

  void drop(client::DbConn& admin) {
    for (auto& b : groups_) b->drop_table(admin);  // (one table, dropped once, for subscriptions)
  }

 private:
  const bool subscriptions_;
  std::vector<std::unique_ptr<QueueBackend>> groups_;
};

// The engine's syncs (and the binary log's group commits when they sync) per delivery.
double syncs_per_delivery(const EngineCounters& delta, const QueueBackend& b, const ServerSync& server, SyncMode sync,
                          uint64_t deliveries) {
  uint64_t syncs = 0;
  for (const auto& [name, value] : delta)
    if (name == b.sync_counter() || (server.binlog_syncs(sync) && name == ServerSync::kBinlogSyncs)) syncs += value;
  return deliveries ? static_cast<double>(syncs) / static_cast<double>(deliveries) : -1;
}

}  // namespace

RunResult run_fanout_scenario(const Options& opt, Engine engine, const ServerSync& server, client::DbConn& admin,
                              Scenario scenario, SyncMode sync, int concurrency) {
  RunResult r;
  r.scenario = scenario_name(scenario);
  r.engine = engine_name(engine);
  r.sync = sync;
  r.concurrency = concurrency;
  const uint64_t m = opt.messages;
  const unsigned k = opt.fanout;
  if (concurrency < static_cast<int>(k)) {
    r.error = "fanout: " + std::to_string(concurrency) + " connections cannot serve " + std::to_string(k) +
              " consumer groups (--fanout): give --concurrency " + std::to_string(k) + " or more";
    return r;
  }
  // QUEUE's fanout is its subscriptions; every other case is K tables.
  FanoutTarget target(opt, engine, engine == Engine::kQueue && scenario == Scenario::kFanout);
  try {
    target.apply_sync(admin, sync);
    target.recreate(admin);
    target.preload(admin, m);
    DeliveryLedger ledger(m * k);  // (group g, message id) is entry g * m + id
    std::vector<std::atomic<uint64_t>> received(k);
    RunControl ctl(opt.run_timeout_s);
    WorkersOutcome out;
    auto counters = [&] {
      EngineCounters c = target.group(0).counters(admin);
      if (server.binlog()) {
        EngineCounters more = ServerSync::counters(admin);
        c.insert(c.end(), more.begin(), more.end());
      }
      return c;
    };
    {
      std::vector<client::DbConn> conns = open_connections(opt, concurrency);
      std::vector<std::unique_ptr<QueueSession>> sessions;
      for (int i = 0; i < concurrency; ++i) sessions.push_back(target.group(i % k).open_session(&conns[i], false));
      const EngineCounters before = counters();
      out = run_workers(concurrency, ctl, [&](int i, WorkerStats& st) {
        const unsigned g = static_cast<unsigned>(i) % k;
        QueueSession& s = *sessions[i];
        auto group_done = [&] { return received[g].load(std::memory_order_relaxed) >= m; };
        Delivered d;
        while (!group_done() && take_one(s, ctl, st, group_done, &d)) {
          ledger.record(d.id < m ? g * m + d.id : m * k + d.id, d.payload_ok);  // (out of range stays so)
          received[g].fetch_add(1, std::memory_order_relaxed);
        }
        finish_session(s, st);
        st.empty_polls = s.empty_polls() - st.final_empty_polls;
      });
      r.counters = counter_delta(before, counters());
    }  // sessions end and connections close before the tables are checked
    r.seconds = out.seconds;
    r.consume = out.merged.consume.summarize();
    r.empty_polls = out.merged.empty_polls;
    r.messages = ledger.received();
    r.rate = r.seconds > 0 ? static_cast<double>(r.messages) / r.seconds : 0;
    r.syncs_per_message = syncs_per_delivery(r.counters, target.group(0), server, sync, r.messages);
    r.error = ctl.error();
    Verification v = ledger.verify(target.rows_left(admin));
    r.verified = v.ok();
    r.verification = v.describe() + " (" + std::to_string(k) + " groups x " + std::to_string(m) + " messages)";
    if (!opt.keep_tables) target.drop(admin);
    target.restore_globals(admin);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace q4m::bench
