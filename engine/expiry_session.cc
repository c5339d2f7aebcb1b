#define MYSQL_SERVER 1
#include <my_global.h>
#include <my_sys.h>
#include <sql_class.h>
#include <log.h>
#include <mysqld.h>
#include <rpl_mi.h>
#include <slave.h>
#include <mysql/service_sql.h>

#include "engine/expiry_session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/policy/expiry.h"
#include "core/util/guarded.h"
#include "engine/binlog_statements.h"
#include "engine/sql_errors.h"

namespace q4m_engine {

namespace {

using Clock = std::chrono::steady_clock;

class ExpirySession final : public q4m::ExpiryLog {
 public:
  bool expires() const override {
    return !opt_readonly && !applier_runs_.load(std::memory_order_relaxed) && !stopped_.load(std::memory_order_relaxed);
  }
  bool logged() const override { return mysql_bin_log.is_open(); }
  void claimed(const std::string& path) override {
    auto st = state_.lock();
    // A table waiting for its retry keeps its time.
    if (st->pending.emplace(path, Clock::now()).second) wake_.notify_one();
  }

  void start() {
    auto st = state_.lock();
    st->stopping = false;
    stopped_ = false;
    thread_ = std::thread([this] { run(); });
  }
  // No expiry from now on (not even unlogged); the thread ends its statement, closes its
  // connection and exits. Again: nothing to do.
  void stop() {
    stopped_ = true;
    {
      auto st = state_.lock();
      st->stopping = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct State {
    // Table paths with rows claimed for expiry, and when to remove them (now, or a second
    // after a failed try).
    std::map<std::string, Clock::time_point> pending;
    bool stopping = false;
  };

  // A replica's applier may start or stop at any time (START SLAVE): looked at every second,
  // and before each round of removals. Not before the server has started: init_slave() fills
  // master_info_index's hash without LOCK_active_mi (the server is one thread then, but this
  // one runs from the plugin's init), and reading it meanwhile crashed a starting server
  // (SIGSEGV in my_hash_element under any_slave_sql_running, a power-cut test's restart).
  void refresh() {
    applier_runs_.store(mysqld_server_started && master_info_index && any_slave_sql_running(false) > 0);
  }

  void run() {
    my_thread_init();
    for (;;) {
      std::vector<std::string> due;
      {
        auto st = state_.lock();
        wake_.wait_for(st.unique_lock(), std::chrono::seconds(1), [&] { return st->stopping || ready(*st); });
        if (st->stopping) break;
        const Clock::time_point now = Clock::now();
        for (auto it = st->pending.begin(); it != st->pending.end();) {
          if (it->second > now) {
            ++it;
            continue;
          }
          due.push_back(it->first);
          it = st->pending.erase(it);
        }
      }
      refresh();
      for (const std::string& path : due) {
        // Become a replica meanwhile: the table's timer gives the rows back (Table::due). At
        // shutdown the rows stay claimed (expired again after the restart).
        if (!expires() || abort_loop) continue;
        if (expire(path)) continue;
        // The rows may still be claimed: again in a second (whenever the table asks again).
        state_.lock()->pending[path] = Clock::now() + std::chrono::seconds(1);
      }
    }
    if (mysql_) mysql_close(mysql_);
    mysql_ = nullptr;
    my_thread_end();
  }

  static bool ready(const State& st) {
    const Clock::time_point now = Clock::now();
    return std::any_of(st.pending.begin(), st.pending.end(), [&](const auto& p) { return p.second <= now; });
  }

  // One removal transaction for the rows claimed in the table at `path`.
  bool expire(const std::string& path) {
    std::string db, table;
    if (!split_table_path(path, &db, &table)) return true;  // not a table's file: nothing to do
    if (!mysql_ && !connect()) return false;
    const std::string query = expiry_statement(db, table);
    for (;;) {
      if (mysql_real_query(mysql_, query.data(), static_cast<unsigned long>(query.size())) != 0) {
        const unsigned error = mysql_errno(mysql_);
        const bool gone = error == ER_NO_SUCH_TABLE;  // dropped meanwhile: nothing to retry
        if (!gone && error != ER_LOCK_WAIT_TIMEOUT) warn(db + "." + table, mysql_error(mysql_));
        mysql_close(mysql_);  // a fresh session next time
        mysql_ = nullptr;
        return gone;
      }
      static const char kCount[] = "SELECT @queue_expired";
      size_t removed = 0;
      if (mysql_real_query(mysql_, kCount, sizeof(kCount) - 1) == 0) {
        if (MYSQL_RES* res = mysql_store_result(mysql_)) {
          if (MYSQL_ROW row = mysql_fetch_row(res); row && row[0]) removed = strtoull(row[0], nullptr, 10);
          mysql_free_result(res);
        }
      }
      if (removed < kMaxExpiredRowsPerStatement || !expires()) return true;
    }
  }

  bool connect() {
    mysql_ = mysql_init(nullptr);
    if (!mysql_) return false;
    // A local session starts with the binary log off for its statements: the removals must
    // be logged. Each statement commits at once whatever the server's defaults, and waits at
    // most a second for a table another session locked (LOCK TABLES, a dump): the other
    // tables' expiries go on, that one is retried. (The session has every privilege, so
    // read_only does not refuse it.)
    static const char kLogged[] =
        "SET SESSION sql_log_bin = 1, autocommit = 1, tx_read_only = 0, lock_wait_timeout = 1";
    if (!mysql_real_connect_local(mysql_) || mysql_real_query(mysql_, kLogged, sizeof(kLogged) - 1) != 0) {
      warn("(connection)", mysql_error(mysql_));
      mysql_close(mysql_);
      mysql_ = nullptr;
      return false;
    }
    return true;
  }

  // Once a minute at most: a failing table is retried every second.
  void warn(const std::string& what, const char* error) {
    const Clock::time_point now = Clock::now();
    if (now < quiet_until_) return;
    quiet_until_ = now + std::chrono::minutes(1);
    sql_print_warning("QUEUE: removing the expired rows of %s (MESSAGE_TTL) failed: %s; retrying every second",
                      what.c_str(), error ? error : "");
  }

  q4m::Guarded<State> state_;
  std::condition_variable wake_;
  std::thread thread_;
  std::atomic<bool> applier_runs_{false};
  std::atomic<bool> stopped_{false};
  // The thread's own.
  MYSQL* mysql_ = nullptr;
  Clock::time_point quiet_until_;
};

ExpirySession& session() {
  static ExpirySession s;
  return s;
}

}  // namespace

void start_expiry_session() {
  session().start();
  q4m::ExpiryLog::set(&session());
}

void stop_expiry_session() { session().stop(); }

void forget_expiry_session() {
  session().stop();
  q4m::ExpiryLog::set(nullptr);
}

}  // namespace q4m_engine
