// The two queues under test behind one interface: the QUEUE engine (owner mode,
// queue_wait) and an InnoDB table consumed with FOR UPDATE SKIP LOCKED.
// A backend owns the table; a session is one client connection using it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/db_conn.h"
#include "message_codec.h"
#include "options.h"
#include "saved_globals.h"

namespace q4m::bench {

using EngineCounters = std::vector<std::pair<std::string, uint64_t>>;

// A session's INSERTs of one or more rows: one statement per row count, made on first use
// or by prepare() (over the prepared protocol, prepared once per count: a run needs at most
// two, full and last, or just the one-row statement).
class BatchInsert {
 public:
  BatchInsert(client::DbConn& conn, const MessageCodec& codec, client::Protocol protocol)
      : conn_(conn), codec_(codec), protocol_(protocol) {}
  // Makes the statement for `count` rows now (before a run's clock starts).
  client::DbStatement& prepare(uint64_t count);
  // Inserts messages [first, first+count) in one statement.
  void run(uint64_t first, uint64_t count) {
    codec_.run_insert_batch(prepare(count), first, count, &payloads_, &params_);
  }

 private:
  client::DbConn& conn_;
  const MessageCodec& codec_;
  const client::Protocol protocol_;
  std::vector<std::pair<uint64_t, std::unique_ptr<client::DbStatement>>> statements_;
  std::vector<std::string> payloads_;
  std::vector<client::Param> params_;
};

// after - before, by name (counters missing from `before` count from 0). A gauge such as
// Innodb_history_list_length that shrank gives 0: the report shows growth.
EngineCounters counter_delta(const EngineCounters& before, const EngineCounters& after);

// Messages a batch consume took and consume() has not handed out yet.
class TakenBatch {
 public:
  bool pop(Delivered* out) {
    if (next_ == rows_.size()) return false;
    *out = rows_[next_++];
    return true;
  }
  // Starts a new batch; add() its messages.
  void clear() {
    rows_.clear();
    next_ = 0;
  }
  void add(const Delivered& d) { rows_.push_back(d); }
  bool empty() const { return next_ == rows_.size(); }

 private:
  std::vector<Delivered> rows_;
  size_t next_ = 0;
};

class QueueSession {
 public:
  virtual ~QueueSession() = default;
  // Enqueues message `id` (durable per the sync mode when it returns).
  virtual void insert(uint64_t id) = 0;
  // Enqueues messages [first, first+count) with one multi-row INSERT (and its commit).
  virtual void insert_batch(uint64_t first, uint64_t count) = 0;
  // Takes the next message. False when none came: QUEUE waited the wait
  // timeout in vain; InnoDB found no unlocked row.
  virtual bool consume(Delivered* out) = 0;
  // Acknowledges what the session still holds (QUEUE: queue_end()); true if
  // that was work (the last message's removal), false if nothing was held. A
  // transactional session ends its open transaction (ROLLBACK: nothing is in it).
  virtual bool finish() = 0;

  // A transactional session's (open_session(conn, true)) work, one transaction each.
  // outbox: writes order `id` (InnoDB) and enqueues message `id`; one COMMIT.
  virtual void outbox(uint64_t id) = 0;
  // Takes the next message, writes its result row (InnoDB) and ends the message (QUEUE:
  // queue_end(); InnoDB: DELETE); one COMMIT. False as for consume(), with nothing done.
  virtual bool consume_in_transaction(Delivered* out) = 0;
  uint64_t empty_polls() const { return empty_polls_; }

 protected:
  uint64_t empty_polls_ = 0;
};

class QueueBackend {
 public:
  virtual ~QueueBackend() = default;
  virtual Engine engine() const = 0;
  // The statements of the table and of a session, for the report and docs/benchmarks.md.
  virtual std::vector<std::string> describe_sql() const = 0;

  virtual void recreate_table(client::DbConn& admin) = 0;
  // Sets the engine's sync settings for `mode` (globals: remembered the first time and put
  // back by restore_globals(), so a benchmark leaves the server as it found it). The
  // server's own (InnoDB's log, the binary log) are ServerSync's.
  virtual void apply_sync(client::DbConn& admin, SyncMode mode) = 0;
  void restore_globals(client::DbConn& admin) { saved_globals_.restore(admin); }
  // The session prepares `conn` (session variables) and uses it until destroyed.
  // transactional: for outbox() and consume_in_transaction() (autocommit=0, txn_tables.h).
  virtual std::unique_ptr<QueueSession> open_session(client::DbConn* conn, bool transactional) = 0;
  // The engine's global I/O counters (QUEUE: SHOW ENGINE QUEUE STATUS; InnoDB:
  // its fsync/log/lock status variables). A run reports their change.
  virtual EngineCounters counters(client::DbConn& admin) = 0;
  // Which counter counts the syncs that make messages durable.
  virtual const char* sync_counter() const = 0;
  // Which counter adds up the microseconds spent inside those syncs; null if none does.
  virtual const char* sync_time_counter() const { return nullptr; }

  const std::string& table() const { return codec_.table(); }
  const MessageCodec& codec() const { return codec_; }
  void drop_table(client::DbConn& admin);
  // Inserts ids [first, first+count) with multi-row INSERTs (not timed).
  void preload(client::DbConn& admin, uint64_t first, uint64_t count);
  uint64_t rows_left(client::DbConn& admin);

 protected:
  explicit QueueBackend(MessageCodec codec) : codec_(std::move(codec)) {}
  MessageCodec codec_;
  SavedGlobals saved_globals_;  // what apply_sync() changed
};

// Rows of (name, number) from a SHOW statement; name and value column indexes given.
EngineCounters read_counters(client::DbConn& admin, const std::string& sql, unsigned name_col, unsigned value_col);

// consume_batch > 1: each consume statement takes up to that many messages; the session
// hands them out one per consume() call.
// table_options: appended to the table's CREATE TABLE (q4m-bench --queue-options).
// receipts_lease_s > 0: consumes by receipt (queue_receive, queue_end_receipt), not owner mode.
// table: the table's name (empty: q4m_bench_queue / q4m_bench_innodb). subscription: sessions
// consume the table's subscription of that name ('table@name'); the table is made without it
// (fanout.h makes the subscriptions).
std::unique_ptr<QueueBackend> make_queue_engine_backend(const std::string& table_options, const PayloadSpec& payload,
                                                        double wait_timeout_s,
                                                        uint64_t consume_batch, client::Protocol protocol,
                                                        double receipts_lease_s = 0, const std::string& table = "",
                                                        const std::string& subscription = "");
std::unique_ptr<QueueBackend> make_innodb_backend(const PayloadSpec& payload, uint32_t poll_sleep_us,
                                                  uint64_t consume_batch, client::Protocol protocol,
                                                  const std::string& table = "");

}  // namespace q4m::bench
