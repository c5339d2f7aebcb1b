// The QUEUE engine, used the way Q4M clients use it: one statement per message,
//   SELECT * FROM t WHERE queue_wait('t', timeout)
// removes the row this connection owned and takes ownership of the next one. With
// --consume-batch N: SELECT * FROM t WHERE queue_wait_batch('t', N, timeout) removes the
// batch it owned and takes up to N rows.
// Transactional sessions (autocommit=0) take one message per transaction and end it
// explicitly, inside it: queue_wait, the InnoDB result row, queue_end(), COMMIT.
// With --receipts LEASE: SELECT *, queue_receipt() FROM t WHERE queue_receive('t', LEASE, N,
// timeout) takes the rows, and SELECT queue_end_receipt('t', ?) ends them (the previous
// ones before the next take, or inside the transaction of consume-txn).
#include <cstdio>
#include <optional>

#include "queue_backend.h"
#include "txn_tables.h"

namespace q4m::bench {

namespace {

class QueueEngineSession : public QueueSession {
 public:
  QueueEngineSession(client::DbConn* conn, const MessageCodec& codec, const std::string& consume_sql, bool batched,
                     client::Protocol protocol, bool sync_removals, bool transactional, bool receipts)
      : conn_(conn), codec_(codec), consume_(*conn, consume_sql, protocol), inserts_(*conn, codec, protocol),
        batched_(batched), receipts_(receipts) {
    conn->exec(std::string("SET SESSION queue_sync_removals = ") + (sync_removals ? "ON" : "OFF"));
    inserts_.prepare(1);
    if (receipts_) end_.emplace(*conn, "SELECT queue_end_receipt('" + codec.table() + "', ?)", protocol);
    if (transactional) {
      txn_.emplace(*conn, codec, protocol);
      if (!receipts_) end_.emplace(*conn, "SELECT queue_end()", protocol);
    }
  }

  void outbox(uint64_t id) override {
    txn_->insert_order(id);
    inserts_.run(id, 1);
    txn_->commit();
  }

  bool consume_in_transaction(Delivered* out) override {
    consume_.run({});
    if (!consume_.next()) {  // timed out: the transaction holds nothing
      ++empty_polls_;
      return false;
    }
    codec_.decode(consume_.row(), consume_.lengths(), 0, out);
    if (receipts_) note_receipt();
    txn_->insert_result(out->id);
    end_owned();  // the removal joins the transaction
    txn_->commit();
    return true;
  }

  void insert(uint64_t id) override { inserts_.run(id, 1); }
  void insert_batch(uint64_t first, uint64_t count) override { inserts_.run(first, count); }

  bool consume(Delivered* out) override {
    if (batched_) return consume_from_batch(out);
    if (receipts_ && owning_) end_owned();  // (owner mode: the next wait ends it)
    consume_.run({});
    // A timeout (no row) has still removed the previously owned row; the connection owns none.
    owning_ = consume_.next();
    if (!owning_) {
      ++empty_polls_;
      return false;
    }
    codec_.decode(consume_.row(), consume_.lengths(), 0, out);
    if (receipts_) note_receipt();
    return true;
  }

  bool finish() override {
    if (txn_) txn_->rollback();  // ends the last (empty) transaction
    if (!owning_) return false;
    if (receipts_)
      end_owned();
    else
      conn_->exec("SELECT queue_end()");
    owning_ = false;
    return true;
  }

 private:
  // The next message of the batch in hand; when it is used up, the next statement acks it
  // and takes a new one (all its rows are read at once: an INSERT may come in between).
  bool consume_from_batch(Delivered* out) {
    if (taken_.pop(out)) return true;
    if (receipts_ && owning_) end_owned();
    consume_.run({});
    taken_.clear();
    Delivered d;
    while (consume_.next()) {
      codec_.decode(consume_.row(), consume_.lengths(), 0, &d);
      if (receipts_) note_receipt();
      taken_.add(d);
    }
    owning_ = !taken_.empty();
    if (!owning_) {
      ++empty_polls_;
      return false;
    }
    return taken_.pop(out);
  }

  // The receipt of the row just read: its last column.
  void note_receipt() {
    const size_t col = codec_.payload().enabled() ? 2 : 1;
    if (!receipts_list_.empty()) receipts_list_ += ',';
    receipts_list_.append(consume_.row()[col], consume_.lengths()[col]);
  }
  // Ends what the session holds: queue_end() in a transaction, or its receipts.
  void end_owned() {
    if (!receipts_) {
      end_->run({});
      return;
    }
    end_->run({client::Param(std::string_view(receipts_list_))});
    while (end_->next()) {
    }
    receipts_list_.clear();
  }

  client::DbConn* conn_;
  const MessageCodec& codec_;
  client::DbStatement consume_;
  BatchInsert inserts_;
  bool owning_ = false;
  const bool batched_;
  const bool receipts_;
  std::string receipts_list_;  // of the rows taken and not ended yet
  TakenBatch taken_;
  std::optional<TxnStatements> txn_;  // transactional sessions only
  std::optional<client::DbStatement> end_;
};

class QueueEngineBackend : public QueueBackend {
 public:
  QueueEngineBackend(std::string table_options, const PayloadSpec& payload, double wait_timeout_s,
                     uint64_t consume_batch, client::Protocol protocol, double receipts_lease_s,
                     const std::string& table_name, const std::string& subscription)
      : QueueBackend(MessageCodec(table_name.empty() ? "q4m_bench_queue" : table_name, payload)),
        table_options_(std::move(table_options)),
        protocol_(protocol),
        consume_batch_(consume_batch),
        receipts_(receipts_lease_s > 0) {
    char timeout[32], lease[32];
    std::snprintf(timeout, sizeof timeout, "%g", wait_timeout_s);
    std::snprintf(lease, sizeof lease, "%g", receipts_lease_s);
    const std::string source = subscription.empty() ? table() : table() + "@" + subscription;
    if (receipts_) {
      consume_sql_ = "SELECT *, queue_receipt() FROM " + table() + " WHERE queue_receive('" + source + "', " + lease +
                     ", " + std::to_string(consume_batch) + ", " + timeout + ")";
      return;
    }
    consume_sql_ = consume_batch > 1 ? "SELECT * FROM " + table() + " WHERE queue_wait_batch('" + source + "', " +
                                           std::to_string(consume_batch) + ", " + timeout + ")"
                                     : "SELECT * FROM " + table() + " WHERE queue_wait('" + source + "', " + timeout + ")";
  }

  Engine engine() const override { return Engine::kQueue; }

  std::vector<std::string> describe_sql() const override {
    if (receipts_)
      return {create_sql(), codec_.insert_statement() + "  -- ? = id[, payload]",
              consume_sql_ + (consume_batch_ > 1 ? "  -- one per batch" : "  -- one per message"),
              "SELECT queue_end_receipt('" + table() + "', ?)  -- ? = the receipts taken, before the next take",
              "-- consume-txn (autocommit=0): " + consume_sql_ + "; INSERT INTO " + kResultsTable +
                  " (id) VALUES (?); SELECT queue_end_receipt('" + table() + "', ?); COMMIT"};
    return {create_sql(),
            codec_.insert_statement() + "  -- ? = id[, payload]",
            consume_sql_ + (consume_batch_ > 1 ? "  -- one per batch" : "  -- one per message"),
            "SELECT queue_end()  -- once, after the last message",
            "-- outbox (autocommit=0): INSERT INTO " + std::string(kOrdersTable) + " (id, payload) VALUES (?, ?); " +
                codec_.insert_statement() + "; COMMIT",
            "-- consume-txn (autocommit=0): " + consume_sql_ + "; INSERT INTO " + kResultsTable +
                " (id) VALUES (?); SELECT queue_end(); COMMIT"};
  }

  void recreate_table(client::DbConn& admin) override {
    drop_table(admin);
    admin.exec(create_sql());
  }

  void apply_sync(client::DbConn& admin, SyncMode mode) override {
    saved_globals_.set(admin, "queue_sync_mode", mode == SyncMode::kNone ? "'none'" : "'fdatasync'");
    sync_removals_ = mode != SyncMode::kDurableInserts;  // a session setting (open_session)
  }

  std::unique_ptr<QueueSession> open_session(client::DbConn* conn, bool transactional) override {
    return std::make_unique<QueueEngineSession>(conn, codec_, consume_sql_, consume_batch_ > 1, protocol_,
                                                sync_removals_, transactional, receipts_);
  }

  EngineCounters counters(client::DbConn& admin) override {
    return read_counters(admin, "SHOW ENGINE QUEUE STATUS", 1, 2);  // Type, Name, Status
  }
  const char* sync_counter() const override { return "sys_sync"; }
  const char* sync_time_counter() const override { return "sync_us"; }

 private:
  bool sync_removals_ = true;
  std::string create_sql() const {
    return "CREATE TABLE " + table() + " (v BIGINT UNSIGNED NOT NULL" +
           (codec_.payload().enabled() ? ", s LONGBLOB NOT NULL" : "") + ") ENGINE=QUEUE" +
           (table_options_.empty() ? "" : " " + table_options_);
  }

  const std::string table_options_;
  const client::Protocol protocol_;
  const uint64_t consume_batch_;
  const bool receipts_;
  std::string consume_sql_;
};

}  // namespace

std::unique_ptr<QueueBackend> make_queue_engine_backend(const std::string& table_options, const PayloadSpec& payload,
                                                        double wait_timeout_s, uint64_t consume_batch,
                                                        client::Protocol protocol, double receipts_lease_s,
                                                        const std::string& table, const std::string& subscription) {
  return std::make_unique<QueueEngineBackend>(table_options, payload, wait_timeout_s, consume_batch, protocol,
                                              receipts_lease_s, table, subscription);
}

}  // namespace q4m::bench
