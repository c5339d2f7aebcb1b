// The InnoDB baseline: the usual SQL work queue. A consumer, in a READ COMMITTED
// transaction, locks the oldest row nobody else has locked, deletes it, commits. With
// --consume-batch N: locks up to N rows, deletes them with one DELETE, commits once.
// Transactional sessions do the same with the result row of the message in the transaction.
#include <algorithm>
#include <map>
#include <memory>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "queue_backend.h"
#include "txn_tables.h"

namespace q4m::bench {

namespace {

constexpr unsigned kErDeadlock = 1213;  // ER_LOCK_DEADLOCK

class InnodbSession : public QueueSession {
 public:
  InnodbSession(client::DbConn* conn, const MessageCodec& codec, const std::string& claim_sql,
                uint32_t poll_sleep_us, bool batched, client::Protocol protocol, bool transactional)
      : conn_(*conn), codec_(codec), poll_sleep_us_(poll_sleep_us), batched_(batched), protocol_(protocol),
        claim_(*conn, claim_sql, protocol), delete_(*conn, "DELETE FROM " + codec.table() + " WHERE id=?", protocol),
        commit_(*conn, "COMMIT", protocol), rollback_(*conn, "ROLLBACK", protocol), inserts_(*conn, codec, protocol) {
    inserts_.prepare(1);
    conn->exec("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    conn->exec("SET SESSION autocommit = 0");
    if (transactional) txn_.emplace(*conn, codec, protocol);
  }

  void outbox(uint64_t id) override {
    txn_->insert_order(id);
    inserts_.run(id, 1);
    commit_.run({});
  }

  bool consume_in_transaction(Delivered* out) override {
    return retrying_deadlocks([&] {
      claim_.run({});
      if (!claim_.next()) return claimed_nothing();
      backoff_us_ = 0;
      const uint64_t row_id = std::strtoull(claim_.row()[0], nullptr, 10);
      codec_.decode(claim_.row(), claim_.lengths(), 1, out);
      txn_->insert_result(out->id);
      delete_.run({row_id});
      commit_.run({});
      return true;
    });
  }

  void insert(uint64_t id) override { insert_batch(id, 1); }

  void insert_batch(uint64_t first, uint64_t count) override {
    inserts_.run(first, count);
    commit_.run({});
  }

  bool consume(Delivered* out) override {
    if (batched_) return consume_from_batch(out);
    return retrying_deadlocks([&] {
      claim_.run({});
      if (!claim_.next()) return claimed_nothing();
      backoff_us_ = 0;
      const uint64_t row_id = std::strtoull(claim_.row()[0], nullptr, 10);
      codec_.decode(claim_.row(), claim_.lengths(), 1, out);
      delete_.run({row_id});
      commit_.run({});
      return true;
    });
  }

  bool finish() override {
    rollback_.run({});  // nothing is held between messages; this just ends cleanly
    return false;
  }

 private:
  // Runs one claim transaction. SKIP LOCKED claims and DELETEs next to each other can
  // deadlock in any of the transaction's statements; InnoDB has then rolled it back (the
  // rows stay queued), and an InnoDB worker retries, as this one does: false, nothing taken.
  // The server counts them (Innodb_deadlocks, in the run's counters).
  template <class Transaction>
  bool retrying_deadlocks(Transaction&& run) {
    try {
      return run();
    } catch (const client::DbError& e) {
      if (e.code() != kErDeadlock) throw;
      rollback_.run({});
      taken_.clear();
      return false;
    }
  }

  // Everything left is locked by other consumers (or the table is empty).
  bool claimed_nothing() {
    rollback_.run({});
    ++empty_polls_;
    back_off();
    return false;
  }

  // What a polling worker does when it finds nothing: the first retry is
  // immediate, then sleeps of 50 us doubling up to poll_sleep_us (0: never sleep).
  // Without it idle pollers starve the busy ones of CPU.
  void back_off() {
    if (poll_sleep_us_ == 0) return;
    if (backoff_us_) std::this_thread::sleep_for(std::chrono::microseconds(backoff_us_));
    backoff_us_ = backoff_us_ ? std::min(backoff_us_ * 2, poll_sleep_us_) : std::min(50u, poll_sleep_us_);
  }

  // The next message of the batch in hand; when it is used up, claims the next batch,
  // deletes it and commits (the batch's cost, as for QUEUE: one statement to take, one
  // commit to remove).
  bool consume_from_batch(Delivered* out) {
    if (taken_.pop(out)) return true;
    return retrying_deadlocks([&] {
      claim_.run({});
      taken_.clear();
      ids_.clear();
      Delivered d;
      while (claim_.next()) {
        ids_.push_back(std::strtoull(claim_.row()[0], nullptr, 10));
        codec_.decode(claim_.row(), claim_.lengths(), 1, &d);
        taken_.add(d);
      }
      if (ids_.empty()) return claimed_nothing();
      backoff_us_ = 0;
      std::vector<client::Param> params(ids_.begin(), ids_.end());
      delete_of(ids_.size()).run(params.data(), params.size());
      commit_.run({});
      return taken_.pop(out);
    });
  }

  // DELETE FROM t WHERE id IN (?, ...) for `count` ids, made once per count.
  client::DbStatement& delete_of(size_t count) {
    std::unique_ptr<client::DbStatement>& st = batch_deletes_[count];
    if (!st) {
      std::string sql = "DELETE FROM " + codec_.table() + " WHERE id IN (?";
      for (size_t i = 1; i < count; i++) sql += ", ?";
      st = std::make_unique<client::DbStatement>(conn_, sql + ")", protocol_);
    }
    return *st;
  }

  client::DbConn& conn_;
  const MessageCodec& codec_;
  const uint32_t poll_sleep_us_;
  const bool batched_;
  const client::Protocol protocol_;
  uint32_t backoff_us_ = 0;
  client::DbStatement claim_, delete_, commit_, rollback_;
  BatchInsert inserts_;
  TakenBatch taken_;
  std::vector<uint64_t> ids_;
  std::map<size_t, std::unique_ptr<client::DbStatement>> batch_deletes_;
  std::optional<TxnStatements> txn_;  // transactional sessions only
};

class InnodbBackend : public QueueBackend {
 public:
  InnodbBackend(const PayloadSpec& payload, uint32_t poll_sleep_us, uint64_t consume_batch, client::Protocol protocol,
                const std::string& table_name)
      : QueueBackend(MessageCodec(table_name.empty() ? "q4m_bench_innodb" : table_name, payload)), poll_sleep_us_(poll_sleep_us), protocol_(protocol),
        consume_batch_(consume_batch),
        claim_sql_("SELECT id, v" + std::string(payload.enabled() ? ", s" : "") + " FROM " + table() +
                   " ORDER BY id LIMIT " + std::to_string(consume_batch) + " FOR UPDATE SKIP LOCKED") {}

  Engine engine() const override { return Engine::kInnodb; }

  std::vector<std::string> describe_sql() const override {
    return {create_sql(),
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION autocommit = 0",
            codec_.insert_statement() + "; COMMIT  -- ? = id[, payload]",
            consume_batch_ > 1
                ? claim_sql_ + "; DELETE FROM " + table() + " WHERE id IN (?, ...); COMMIT  -- the claimed ids"
                : claim_sql_ + "; DELETE FROM " + table() + " WHERE id=?; COMMIT  -- ? = the claimed id",
            "ROLLBACK  -- after a claim that found no unlocked row",
            "-- outbox: INSERT INTO " + std::string(kOrdersTable) + " (id, payload) VALUES (?, ?); " +
                codec_.insert_statement() + "; COMMIT",
            "-- consume-txn: " + claim_sql_ + "; INSERT INTO " + kResultsTable + " (id) VALUES (?); DELETE FROM " +
                table() + " WHERE id=?; COMMIT"};
  }

  void recreate_table(client::DbConn& admin) override {
    drop_table(admin);
    admin.exec(create_sql());
  }

  // InnoDB's log is the server's: ServerSync sets innodb_flush_log_at_trx_commit for every run
  // (the transactional scenarios write InnoDB rows with either queue).
  void apply_sync(client::DbConn&, SyncMode) override {}

  std::unique_ptr<QueueSession> open_session(client::DbConn* conn, bool transactional) override {
    return std::make_unique<InnodbSession>(conn, codec_, claim_sql_, poll_sleep_us_, consume_batch_ > 1, protocol_,
                                           transactional);
  }

  EngineCounters counters(client::DbConn& admin) override {
    return read_counters(admin,
                         "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_data_fsyncs', 'Innodb_os_log_fsyncs', "
                         "'Innodb_log_writes', 'Innodb_row_lock_waits', 'Innodb_row_lock_time', "
                         "'Innodb_deadlocks', 'Innodb_history_list_length')",
                         0, 1);
  }
  const char* sync_counter() const override { return "Innodb_data_fsyncs"; }

 private:
  std::string create_sql() const {
    return "CREATE TABLE " + table() +
           " (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, v BIGINT UNSIGNED NOT NULL" +
           (codec_.payload().enabled() ? ", s LONGBLOB NOT NULL" : "") + ") ENGINE=InnoDB";
  }

  const uint32_t poll_sleep_us_;
  const client::Protocol protocol_;
  const uint64_t consume_batch_;
  const std::string claim_sql_;
};

}  // namespace

std::unique_ptr<QueueBackend> make_innodb_backend(const PayloadSpec& payload, uint32_t poll_sleep_us,
                                                  uint64_t consume_batch, client::Protocol protocol,
                                                  const std::string& table) {
  return std::make_unique<InnodbBackend>(payload, poll_sleep_us, consume_batch, protocol, table);
}

}  // namespace q4m::bench
