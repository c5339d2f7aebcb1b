// q4m-bench: QUEUE engine vs an InnoDB SKIP LOCKED queue vs the SELECT 1
// ceiling, on one server in one run. See docs/benchmarks.md.
#include <cstdio>
#include <memory>

#include "machine_info.h"
#include "options.h"
#include "queue_backend.h"
#include "repeats.h"
#include "report.h"
#include "fanout.h"
#include "scenarios.h"
#include "server_sync.h"
#include "txn_tables.h"

using namespace q4m;
using namespace q4m::bench;

namespace {

// Connects without a database, creates it if needed, then uses it.
client::DbConn connect_admin(const Options& opt) {
  client::ConnParams p = opt.conn;
  p.db.clear();
  p.read_timeout_s = 600;
  client::DbConn admin(p);
  admin.exec("CREATE DATABASE IF NOT EXISTS `" + opt.conn.db + "`");
  admin.exec("USE `" + opt.conn.db + "`");
  return admin;
}

bool any_transactional(const Options& opt) {
  for (Scenario sc : opt.scenarios)
    if (is_transactional(sc)) return true;
  return false;
}

bool queue_engine_installed(client::DbConn& admin) {
  std::string support =
      admin.scalar("SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE = 'QUEUE'", "NO");
  return support == "YES" || support == "DEFAULT";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_options(argc, argv);
  if (mysql_library_init(0, nullptr, nullptr) != 0) {
    std::fprintf(stderr, "q4m-bench: mysql_library_init failed\n");
    return 2;
  }
  Report rep;
  std::vector<std::unique_ptr<QueueBackend>> backends;
  bool has_queue = false;
  client::DbConn admin;
  std::unique_ptr<ServerSync> server;
  try {
    admin = connect_admin(opt);
    server = std::make_unique<ServerSync>(admin);
    rep.binlog = server->binlog();
    if (opt.binlog != BinlogRequirement::kAny && (opt.binlog == BinlogRequirement::kOn) != server->binlog()) {
      std::fprintf(stderr, "q4m-bench: --binlog %s, but %s runs with the binary log %s (a startup setting: %s; "
                           "scripts/bench.sh --binlog on|off starts its server so)\n",
                   opt.binlog == BinlogRequirement::kOn ? "on" : "off", client::DbConn::describe(opt.conn).c_str(),
                   server->binlog() ? "on" : "off", server->binlog() ? "--skip-log-bin" : "--log-bin");
      return 2;
    }
    if (any_transactional(opt)) rep.txn_sql = txn_tables_sql();
    PayloadSpec payload(opt.payload, opt.var_length);
    for (Engine e : opt.engines) {
      if (e == Engine::kQueue) {
        if (!queue_engine_installed(admin)) {
          std::fprintf(stderr, "q4m-bench: the QUEUE engine is not installed on %s "
                               "(INSTALL SONAME 'ha_queue'), or use --engines innodb\n",
                       client::DbConn::describe(opt.conn).c_str());
          return 2;
        }
        backends.push_back(make_queue_engine_backend(opt.queue_table_options, payload, opt.wait_timeout_s, opt.consume_batch, opt.protocol,
                                                     opt.receipts_lease_s));
        rep.queue_sql = backends.back()->describe_sql();
        has_queue = true;
      } else {
        backends.push_back(make_innodb_backend(payload, opt.poll_sleep_us, opt.consume_batch, opt.protocol));
        rep.innodb_sql = backends.back()->describe_sql();
      }
    }
    rep.machine = collect_machine_info(admin);
    std::fprintf(stderr, "machine: %s\n", rep.machine.line().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "q4m-bench: setup failed: %s\n", e.what());
    return 2;
  }

  auto record = [&](RunResult r) {
    if (!r.ok()) std::fprintf(stderr, "FAILED: %s: %s %s\n", progress_line(r).c_str(), r.error.c_str(), r.verification.c_str());
    rep.runs.push_back(std::move(r));
  };

  for (SyncMode sync : opt.sync) {
    try {
      server->apply(admin, sync);
      for (auto& b : backends) b->apply_sync(admin, sync);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "q4m-bench: cannot set sync mode %s: %s\n", sync_name(sync), e.what());
      return 2;
    }
    for (int c : opt.concurrency) {
      // Repeats are interleaved so that a burst of outside load hits every configuration alike.
      std::vector<std::vector<RunResult>> repeats;
      for (int rep = 0; rep < opt.repeat; ++rep) {
        size_t k = 0;
        auto add = [&](RunResult r) {
          std::fprintf(stderr, "%s\n", progress_line(r).c_str());
          if (repeats.size() <= k) repeats.emplace_back();
          repeats[k++].push_back(std::move(r));
        };
        if (opt.select1) add(run_select1(opt, sync, c));
        if (opt.empty_poll && has_queue) add(run_empty_poll(opt, admin, sync, c));
        for (Scenario sc : opt.scenarios)
          for (auto& b : backends) {
            if (!is_fanout(sc)) {
              add(run_queue_scenario(opt, *b, *server, admin, sc, sync, c));
            } else if (sc == Scenario::kFanout || b->engine() == Engine::kQueue) {  // (InnoDB's fanout is tables)
              add(run_fanout_scenario(opt, b->engine(), *server, admin, sc, sync, c));
            }
          }
      }
      for (auto& runs : repeats) record(combine_repeats(std::move(runs)));
    }
  }

  auto restore = [&](auto&& put_back) {
    try {
      put_back();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "q4m-bench: restoring the server's sync settings: %s\n", e.what());
    }
  };
  restore([&] { server->restore(admin); });
  for (auto& b : backends) restore([&] { b->restore_globals(admin); });
  if (!opt.keep_tables) {
    for (auto& b : backends) {
      try {
        b->drop_table(admin);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "q4m-bench: dropping %s: %s\n", b->table().c_str(), e.what());
      }
    }
    try {
      if (any_transactional(opt)) drop_txn_tables(admin);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "q4m-bench: dropping %s and %s: %s\n", kOrdersTable, kResultsTable, e.what());
    }
  }
  if (opt.json)
    print_json(opt, rep, stdout);
  else
    print_tables(opt, rep, stdout);
  if (!opt.json_out.empty()) {
    if (std::FILE* f = std::fopen(opt.json_out.c_str(), "w")) {
      print_json(opt, rep, f);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "q4m-bench: cannot write %s\n", opt.json_out.c_str());
      return 2;
    }
  }
  admin.close();
  mysql_library_end();
  return rep.all_ok() ? 0 : 1;
}
