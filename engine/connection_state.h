// Per-connection state of the QUEUE engine: the connection's Consumer (owner mode,
// DELETE claims) and a pending queue_set_srcid(). Stored in the THD's ha_data slot of
// the QUEUE handlerton so the server calls close_connection/kill_query for it.
// Used only by its own connection thread, except Consumer::interrupt() (KILL QUERY).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <memory>

#include "core/table/consumer.h"
#include "core/table/queue_table.h"
#include "core/table/snapshots.h"
#include "core/table/transaction.h"

class THD;
struct handlerton;

namespace q4m_engine {

// queue_set_srcid(source_id, mode, rowid [, rowid ...]): the next rows this connection
// inserts are these rows of the source, one id each, in order (a list needs one INSERT).
struct PendingRelay {
  uint32_t source_id = 0;
  std::vector<uint64_t> source_rowids;  // increasing
  bool reset = false;  // mode 'w'
};

class ConnectionState {
 public:
  // connection_id: the THD's, as CONNECTION_ID() and SHOW PROCESSLIST give it.
  ConnectionState(uint64_t connection_id, uint64_t mark) : consumer_(connection_id), mark_(mark) {}
  ~ConnectionState() { end_snapshot(); }
  ConnectionState(const ConnectionState&) = delete;
  ConnectionState& operator=(const ConnectionState&) = delete;
  // Unique per state, kept in the session's hidden queue_session_mark variable.
  uint64_t mark() const { return mark_; }
  q4m::Consumer& consumer() { return consumer_; }

  // "db.table" of the owned row's table as queue_wait() was given it, for messages about
  // the owned row (an expired lease).
  // and its names as metadata locks name them (a transaction that ends the row locks the
  // table until its own end, engine/transactions.h).
  void set_owned_label(std::string label, std::string db = "", std::string table = "") {
    owned_label_ = std::move(label);
    owned_db_ = std::move(db);
    owned_table_ = std::move(table);
  }
  const std::string& owned_label() const { return owned_label_; }
  const std::string& owned_db() const { return owned_db_; }
  const std::string& owned_table_name() const { return owned_table_; }

  // The queue row the statement `query_id` is reading, and its table (0 = its scan ended).
  // With a batch owned, queue_rowid() and queue_delivery_count() answer for that row
  // (SELECT queue_rowid(), q.* FROM q), and NULL once the scan has ended (an ORDER BY
  // evaluates them after reading every row: the row they belong to is unknown then);
  // queue_scan_rowid() and queue_scan_state() answer for it in any scan. The table lives
  // at least as long as the statement's handler, which clears the note at its scan's end.
  void note_row_read(int64_t query_id, uint64_t rowid, q4m::QueueTable* table = nullptr,
                     const q4m::EndedRow* ended = nullptr) {
    read_query_id_ = query_id;
    read_rowid_ = rowid;
    read_table_ = table;
    read_ended_ = ended ? *ended : q4m::EndedRow();
  }
  // The history row the statement `query_id` is reading (HISTORY_RETENTION), or null.
  const q4m::EndedRow* ended_row_read_in(int64_t query_id) const {
    return read_query_id_ == query_id && read_rowid_ && read_ended_.id == read_rowid_ ? &read_ended_ : nullptr;
  }
  // queue_scan_history() in statement `query_id`: its scan reads the table's history rows
  // (set as the statement is prepared, before its scan starts).
  void scan_history_in(int64_t query_id) { history_query_id_ = query_id; }
  bool scans_history_in(int64_t query_id) const { return history_query_id_ == query_id; }
  bool read_rows_in(int64_t query_id) const { return read_query_id_ == query_id; }
  uint64_t row_read_in(int64_t query_id) const { return read_query_id_ == query_id ? read_rowid_ : 0; }
  q4m::QueueTable* table_read_in(int64_t query_id) const {
    return read_query_id_ == query_id && read_rowid_ ? read_table_ : nullptr;
  }

  // queue_receive(): the rows statement `query_id` took under receipts from `table`, in id
  // order, with their receipts. That statement's scan of the table reads them (and only
  // them), and queue_receipt() answers for each (functions/receipt_functions.cc).
  struct ReceivedRows {
    int64_t query_id = -1;
    std::shared_ptr<q4m::QueueTable> table;
    std::vector<std::pair<uint64_t, std::string>> rows;
  };
  void set_received(ReceivedRows r) { received_ = std::move(r); }
  const ReceivedRows* received_in(int64_t query_id) const {
    return received_.query_id == query_id ? &received_ : nullptr;
  }
  // Whether statement `query_id` received rows from `table` (then its scan reads those only):
  // *next = the first of them after `after`, 0 if none is left.
  bool next_received(int64_t query_id, const q4m::QueueTable* table, uint64_t after, uint64_t* next) const {
    if (received_.query_id != query_id || !q4m::same_queue(received_.table.get(), table)) return false;
    *next = 0;
    for (const auto& row : received_.rows)
      if (row.first > after) {
        *next = row.first;
        break;
      }
    return true;
  }

  // A copying ALTER: what the row its scan of the old table read last has been
  // through, for the new table's write of that row (the server reads a row, then writes it).
  void keep_copied_history(int64_t query_id, const q4m::RowHistory& h) {
    copied_query_id_ = query_id;
    copied_history_ = h;
  }
  // Returns and clears it; none if the row just read was not from a QUEUE table's copy scan.
  std::optional<q4m::RowHistory> take_copied_history(int64_t query_id) {
    std::optional<q4m::RowHistory> h;
    if (copied_query_id_ == query_id) h.swap(copied_history_);
    copied_history_.reset();
    return h;
  }

  // The connection's open transaction (engine/transactions.h), null if none.
  q4m::Transaction* transaction() { return txn_.get(); }
  // Opens one if none is open; notes where the statement `query_id` began in it (a failed
  // statement rolls back to there).
  q4m::Transaction& begin_transaction(int64_t query_id) {
    if (!txn_) txn_ = std::make_unique<q4m::Transaction>(consumer_.connection_id());
    if (statement_query_id_ != query_id) {
      statement_query_id_ = query_id;
      statement_mark_ = txn_->mark();
    }
    return *txn_;
  }
  void end_transaction() {
    consumer_.set_transaction(nullptr);
    txn_.reset();
    statement_query_id_ = -1;
  }
  int64_t statement_query_id() const { return statement_query_id_; }
  size_t statement_mark() const { return statement_mark_; }
  // A copying ALTER of a QUEUE table: the table its scan reads, which the new table takes
  // over once the copy is through (QueueTable::take_over, at HA_EXTRA_END_COPY), and whether
  // the rows keep their ids (no ORDER BY). Without, the new rows get ids from next_new_id on:
  // ids the old table never gave out.
  struct CopySource {
    std::shared_ptr<q4m::QueueTable> table;
    bool ids_kept = false;
    uint64_t next_new_id = 0;  // 0 = not asked yet
  };
  void set_copy_source(int64_t query_id, const std::shared_ptr<q4m::QueueTable>& table, bool ids_kept) {
    if (copy_query_id_ == query_id && copy_source_.table == table) return;  // a second scan (ORDER BY sorts first)
    copy_query_id_ = query_id;
    copy_source_ = CopySource{table, ids_kept, 0};
  }
  // The copy source of statement `query_id`, or null.
  CopySource* copy_source(int64_t query_id) {
    return copy_query_id_ == query_id && copy_source_.table ? &copy_source_ : nullptr;
  }
  void forget_copy_source() { copy_source_ = CopySource(); }

  // In a transaction started WITH CONSISTENT SNAPSHOT (engine/transactions.h): the
  // snapshot's point (q4m::Snapshots), open until end_snapshot() or the connection's end.
  void begin_snapshot() {
    end_snapshot();
    snapshot_point_ = q4m::Snapshots::begin();
    snapshot_ = true;
  }
  void end_snapshot();
  bool snapshot() const { return snapshot_; }
  uint64_t snapshot_point() const { return snapshot_point_; }

  void set_pending_relay(PendingRelay r) { pending_relay_ = std::move(r); }
  bool has_pending_relay() const { return pending_relay_.has_value(); }
  // Returns and clears the pending relay declaration.
  std::optional<PendingRelay> take_pending_relay() {
    std::optional<PendingRelay> r = std::move(pending_relay_);
    pending_relay_.reset();
    return r;
  }

 private:
  q4m::EndedRow read_ended_;
  int64_t history_query_id_ = -1;
  q4m::Consumer consumer_;
  const uint64_t mark_;
  std::unique_ptr<q4m::Transaction> txn_;  // declared after consumer_: rolled back first
  int64_t statement_query_id_ = -1;
  size_t statement_mark_ = 0;
  std::optional<PendingRelay> pending_relay_;
  bool snapshot_ = false;
  uint64_t snapshot_point_ = 0;
  std::string owned_label_, owned_db_, owned_table_;
  int64_t read_query_id_ = -1;
  int64_t copied_query_id_ = -1;
  std::optional<q4m::RowHistory> copied_history_;
  int64_t copy_query_id_ = -1;
  CopySource copy_source_;
  uint64_t read_rowid_ = 0;
  q4m::QueueTable* read_table_ = nullptr;
  ReceivedRows received_;
};

// The connection's state, or null if it has none. Own thread only: a connection pool's
// COM_RESET_CONNECTION or COM_CHANGE_USER since the state was made (the session's hidden
// mark no longer matches) ends it first, as a disconnect would: the owned row goes back to
// its queue, delete claims and a pending queue_set_srcid() are dropped.
ConnectionState* find_connection_state(THD* thd);
// The same, created on first use.
ConnectionState& connection_state(THD* thd);
// Any thread (KILL): the state as it is, without the reset check.
ConnectionState* peek_connection_state(THD* thd);
// Connection closing: returns the owned row and claims, frees the state.
void destroy_connection_state(THD* thd);

// The Consumer whose view a scan by this connection uses (null = plain viewer).
inline const q4m::Consumer* viewer_of(THD* thd) {
  ConnectionState* s = find_connection_state(thd);
  return s ? &s->consumer() : nullptr;
}

}  // namespace q4m_engine
