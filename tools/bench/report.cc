#include "report.h"

#include <cmath>

namespace q4m::bench {

namespace {

const RunResult* find_run(const Report& rep, const std::string& scenario, const std::string& engine,
                          SyncMode sync, int concurrency) {
  for (const auto& r : rep.runs)
    if (r.scenario == scenario && r.engine == engine && r.sync == sync && r.concurrency == concurrency)
      return &r;
  return nullptr;
}

bool find_any(const Report& rep, const std::string& scenario, SyncMode sync) {
  for (const auto& r : rep.runs)
    if (r.scenario == scenario && r.sync == sync) return true;
  return false;
}

// a/b as "0.42x"; "-" when either side is missing or failed.
std::string ratio(const RunResult* a, const RunResult* b) {
  if (!a || !b || !a->ok() || !b->ok() || b->rate <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", a->rate / b->rate);
  return buf;
}

std::string us(const LatencySummary& l, bool p99) {
  if (l.count == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", p99 ? l.p99_us : l.p50_us);
  return buf;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string json_num(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", d);
  return buf;
}

std::string json_latency(const LatencySummary& l) {
  return "{\"count\": " + std::to_string(l.count) + ", \"p50_us\": " + json_num(l.p50_us) +
         ", \"p99_us\": " + json_num(l.p99_us) + ", \"max_us\": " + json_num(l.max_us) + "}";
}

std::string json_ratio(const RunResult* a, const RunResult* b) {
  if (!a || !b || !a->ok() || !b->ok() || b->rate <= 0) return "null";
  return json_num(a->rate / b->rate);
}

std::string json_counters(const EngineCounters& c) {
  std::string s = "{";
  for (size_t i = 0; i < c.size(); ++i)
    s += (i ? ", " : "") + json_str(c[i].first) + ": " + std::to_string(c[i].second);
  return s + "}";
}

std::string json_rates(const std::vector<double>& rates) {
  std::string s = "[";
  for (size_t i = 0; i < rates.size(); ++i) s += (i ? ", " : "") + json_num(rates[i]);
  return s + "]";
}

std::string payload_desc(const Options& opt) {
  if (opt.payload == 0) return "none (id column only)";
  return opt.var_length ? "0.." + std::to_string(opt.payload) + " bytes (var-length)"
                        : std::to_string(opt.payload) + " bytes";
}

}  // namespace

bool Report::all_ok() const {
  for (const auto& r : runs)
    if (!r.ok()) return false;
  return true;
}

std::string progress_line(const RunResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "[sync=%s] %-11s %-6s c=%-4d %10.0f %s/s  %.2f s  %s", sync_name(r.sync),
                r.scenario.c_str(), r.engine.c_str(), r.concurrency, r.rate,
                r.engine == "server" ? "q" : "msg", r.seconds, r.ok() ? "ok" : "FAILED");
  return buf;
}

void print_tables(const Options& opt, const Report& rep, std::FILE* out) {
  std::fprintf(out, "machine: %s\n", rep.machine.line().c_str());
  std::fprintf(out, "server variables:");
  for (const auto& [k, v] : rep.machine.server_variables) std::fprintf(out, " %s=%s", k.c_str(), v.c_str());
  std::fprintf(out, "\nprotocol: %s, messages per run: %llu, payload: %s, queue_wait timeout: %g s, innodb poll back-off: up to %u us",
               client::protocol_name(opt.protocol), static_cast<unsigned long long>(opt.messages),
               payload_desc(opt).c_str(), opt.wait_timeout_s, opt.poll_sleep_us);
  if (opt.repeat > 1) std::fprintf(out, ", median of %d runs", opt.repeat);
  if (opt.hold_read_view) std::fprintf(out, ", an InnoDB read view held during queue runs");
  if (opt.consume_batch > 1)
    std::fprintf(out, ", consumers take up to %llu messages per statement (--consume-batch)",
                 static_cast<unsigned long long>(opt.consume_batch));
  std::fprintf(out, "\nbinary log: %s\n",
               rep.binlog ? "on (it coordinates two-phase commit; sync_binlog per sync mode)"
                          : "off (two-phase commit coordinated by the server's tc.log)");

  std::vector<std::string> failures;
  for (SyncMode sync : opt.sync) {
    const std::string sync_desc =
        std::string(sync == SyncMode::kNone ? "none: queue_sync_mode=none, innodb_flush_log_at_trx_commit=2"
                    : sync == SyncMode::kDurable
                        ? "durable: queue_sync_mode=fdatasync, innodb_flush_log_at_trx_commit=1"
                        : "durable-inserts: queue_sync_mode=fdatasync with queue_sync_removals=OFF, "
                          "innodb_flush_log_at_trx_commit=1") +
        (rep.binlog ? (sync == SyncMode::kNone ? ", sync_binlog=0" : ", sync_binlog=1") : "");
    const bool any_ceiling = find_any(rep, kSelect1Scenario, sync) || find_any(rep, kEmptyPollScenario, sync);
    if (any_ceiling) {
      std::fprintf(out, "\n== ceilings  [sync %s] ==\n", sync_desc.c_str());
      std::fprintf(out, "%6s %12s %9s %9s %12s %9s %9s %10s\n", "conc", "select1 q/s", "p50_us", "p99_us",
                   "poll q/s", "p50_us", "p99_us", "poll/sel1");
      for (int c : opt.concurrency) {
        const RunResult* s1 = find_run(rep, kSelect1Scenario, "server", sync, c);
        const RunResult* poll = find_run(rep, kEmptyPollScenario, "server", sync, c);
        if (!s1 && !poll) continue;
        auto rate = [](const RunResult* r) { return r ? std::to_string(static_cast<long long>(r->rate)) : "-"; };
        auto lat = [](const RunResult* r, bool p99) { return r ? us(r->consume, p99) : "-"; };
        std::fprintf(out, "%6d %12s %9s %9s %12s %9s %9s %10s\n", c, rate(s1).c_str(), lat(s1, false).c_str(),
                     lat(s1, true).c_str(), rate(poll).c_str(), lat(poll, false).c_str(), lat(poll, true).c_str(),
                     ratio(poll, s1).c_str());
        for (const RunResult* r : {s1, poll})
          if (r && !r->ok()) failures.push_back(progress_line(*r) + ": " + r->error + " " + r->verification);
      }
    }
    for (Scenario sc : opt.scenarios) {
      std::fprintf(out, "\n== %s  [sync %s] ==\n", scenario_name(sc), sync_desc.c_str());
      std::fprintf(out, "%-7s %5s %10s %8s %8s %8s %8s %11s %9s %8s %6s %9s %9s %9s  %s\n", "engine", "conc",
                   "msg/s", "get_p50", "get_p99", "put_p50", "put_p99", "empty_polls", "sync/msg", "us/sync",
                   "syncing", "/select1", "/poll", "/innodb", "verified");
      for (int c : opt.concurrency) {
        const RunResult* s1 = find_run(rep, kSelect1Scenario, "server", sync, c);
        const RunResult* poll = find_run(rep, kEmptyPollScenario, "server", sync, c);
        const RunResult* inno = find_run(rep, scenario_name(sc), "innodb", sync, c);
        for (Engine e : opt.engines) {
          const RunResult* r = find_run(rep, scenario_name(sc), engine_name(e), sync, c);
          if (!r) continue;
          std::string vs_inno = e == Engine::kQueue ? ratio(r, inno) : "";
          std::string vs_poll = e == Engine::kQueue ? ratio(r, poll) : "";
          char syncs[32] = "-", sync_us[32] = "-", busy[32] = "-";
          if (r->syncs_per_message >= 0) std::snprintf(syncs, sizeof syncs, "%.3f", r->syncs_per_message);
          if (r->us_per_sync >= 0) std::snprintf(sync_us, sizeof sync_us, "%.0f", r->us_per_sync);
          if (r->sync_busy >= 0) std::snprintf(busy, sizeof busy, "%.0f%%", r->sync_busy * 100);
          std::fprintf(out, "%-7s %5d %10.0f %8s %8s %8s %8s %11llu %9s %8s %6s %9s %9s %9s  %s\n",
                       r->engine.c_str(), c, r->rate, us(r->consume, false).c_str(), us(r->consume, true).c_str(),
                       us(r->insert, false).c_str(), us(r->insert, true).c_str(),
                       static_cast<unsigned long long>(r->empty_polls), syncs, sync_us, busy, ratio(r, s1).c_str(),
                       vs_poll.c_str(), vs_inno.c_str(), r->ok() ? "ok" : "FAILED");
          if (!r->ok())
            failures.push_back(progress_line(*r) + ": " + (r->error.empty() ? "" : r->error + "; ") +
                               r->verification);
        }
      }
    }
  }
  std::fprintf(out, "\nget = obtain one message (QUEUE: one queue_wait statement, which also removes the previous "
                    "message; InnoDB: SELECT..FOR UPDATE SKIP LOCKED + DELETE + COMMIT, retried while empty);\n"
                    "put = one INSERT (InnoDB: + COMMIT). sync/msg = the engine's syncs per message (QUEUE "
                    "sys_sync, InnoDB Innodb_data_fsyncs).\nus/sync = QUEUE's mean time inside one fsync/fdatasync "
                    "(the disk's latency); syncing = that time added up over the run's time (near 100%%: syncs "
                    "back to back, the disk sets the pace).\npoll = QUEUE's consume statement on an empty QUEUE "
                    "table with timeout 0: what that statement costs with no message to move.\n/select1, /poll and "
                    "/innodb compare msg/s at the same concurrency.\n");
  bool any_txn = false;
  for (Scenario sc : opt.scenarios) any_txn = any_txn || is_transactional(sc);
  if (any_txn)
    std::fprintf(out, "outbox: put = one transaction (InnoDB order row + message + COMMIT); consume-txn: get = one "
                      "transaction (take + InnoDB result row + end + COMMIT), retried while empty.\nIn them "
                      "sync/msg adds InnoDB's (Innodb_data_fsyncs), and with sync_binlog=1 the binary log's group "
                      "commits (one fsync each).\n");
  if (!failures.empty()) {
    std::fprintf(out, "\nFAILED RUNS:\n");
    for (const auto& f : failures) std::fprintf(out, "  %s\n", f.c_str());
  }
}

void print_json(const Options& opt, const Report& rep, std::FILE* out) {
  std::fprintf(out, "{\n  \"machine\": {\"uname\": %s, \"cpu_model\": %s, \"cpus\": %u, \"load_average\": %s},\n",
               json_str(rep.machine.uname).c_str(), json_str(rep.machine.cpu_model).c_str(), rep.machine.cpus,
               json_str(rep.machine.load_average).c_str());
  std::fprintf(out, "  \"server\": {\"version\": %s, \"binlog\": %s, \"variables\": {",
               json_str(rep.machine.server_version).c_str(), rep.binlog ? "\"on\"" : "\"off\"");
  const char* sep = "";
  for (const auto& [k, v] : rep.machine.server_variables) {
    std::fprintf(out, "%s%s: %s", sep, json_str(k).c_str(), json_str(v).c_str());
    sep = ", ";
  }
  std::fprintf(out, "}},\n  \"options\": {\"protocol\": %s, \"messages\": %llu, \"payload\": %u, \"var_length\": %s, "
                    "\"wait_timeout_s\": %s, \"poll_sleep_us\": %u, \"repeat\": %d, \"hold_read_view\": %s, "
                    "\"consume_batch\": %llu},\n",
               json_str(client::protocol_name(opt.protocol)).c_str(),
               static_cast<unsigned long long>(opt.messages), opt.payload, opt.var_length ? "true" : "false",
               json_num(opt.wait_timeout_s).c_str(), opt.poll_sleep_us, opt.repeat,
               opt.hold_read_view ? "true" : "false", static_cast<unsigned long long>(opt.consume_batch));
  auto sql_list = [&](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_str(v[i]);
    return s + "]";
  };
  std::fprintf(out, "  \"sql\": {\"queue\": %s, \"innodb\": %s, \"txn_tables\": %s},\n",
               sql_list(rep.queue_sql).c_str(), sql_list(rep.innodb_sql).c_str(), sql_list(rep.txn_sql).c_str());
  std::fprintf(out, "  \"runs\": [\n");
  for (size_t i = 0; i < rep.runs.size(); ++i) {
    const RunResult& r = rep.runs[i];
    const RunResult* s1 = find_run(rep, kSelect1Scenario, "server", r.sync, r.concurrency);
    const RunResult* poll = find_run(rep, kEmptyPollScenario, "server", r.sync, r.concurrency);
    const RunResult* inno = find_run(rep, r.scenario, "innodb", r.sync, r.concurrency);
    const bool ceiling = r.engine == "server";
    std::fprintf(out,
                 "    {\"scenario\": %s, \"engine\": %s, \"sync\": %s, \"concurrency\": %d, \"messages\": %llu, "
                 "\"seconds\": %s, \"rate\": %s, \"get\": %s, \"put\": %s, \"empty_polls\": %llu, "
                 "\"ratio_select1\": %s, \"ratio_poll\": %s, \"ratio_innodb\": %s, \"syncs_per_message\": %s, "
                 "\"us_per_sync\": %s, \"sync_busy\": %s, \"counters\": %s, "
                 "\"repeat_rates\": %s, \"ok\": %s, \"verification\": %s, \"error\": %s}%s\n",
                 json_str(r.scenario).c_str(), json_str(r.engine).c_str(), json_str(sync_name(r.sync)).c_str(),
                 r.concurrency, static_cast<unsigned long long>(r.messages), json_num(r.seconds).c_str(),
                 json_num(r.rate).c_str(), json_latency(r.consume).c_str(), json_latency(r.insert).c_str(),
                 static_cast<unsigned long long>(r.empty_polls),
                 r.scenario == kSelect1Scenario ? "null" : json_ratio(&r, s1).c_str(),
                 ceiling ? "null" : json_ratio(&r, poll).c_str(),
                 r.engine == "queue" ? json_ratio(&r, inno).c_str() : "null",
                 r.syncs_per_message >= 0 ? json_num(r.syncs_per_message).c_str() : "null",
                 r.us_per_sync >= 0 ? json_num(r.us_per_sync).c_str() : "null",
                 r.sync_busy >= 0 ? json_num(r.sync_busy).c_str() : "null",
                 json_counters(r.counters).c_str(), json_rates(r.repeat_rates).c_str(), r.ok() ? "true" : "false",
                 json_str(r.verification).c_str(), json_str(r.error).c_str(), i + 1 < rep.runs.size() ? "," : "");
  }
  std::fprintf(out, "  ],\n  \"ok\": %s\n}\n", rep.all_ok() ? "true" : "false");
}

}  // namespace q4m::bench
