// Transaction: what one connection's open transaction (BEGIN ... COMMIT, autocommit=0, XA)
// does to queue tables, until it ends:
//  - rows it inserts are kept here, seen by no consumer and no other connection;
//  - rows it removes (queue_end(), the end inside the next queue_wait(), DELETE) are
//    claimed by its own holder: held (no one else sees or takes them) until the end.
// commit() writes each table's part as one commit (its rows and its removals together);
// rollback() drops the rows and gives the claimed rows back, as queue_abort() does. Every
// change is logged, so that a savepoint or a failed statement can be undone alone.
// Used by its connection's thread only.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/file/write_batch.h"
#include "core/row/holder.h"
#include "core/table/queue_table.h"

namespace q4m {

// Told what a replica needs beyond the rows the server logs itself (the engine puts it in the
// binary log, engine/binlog_statements.h): the rows a transaction's consumers end, the rows
// it removes as another server named them, the new rows it drops, relay sources.
// An error fails the removal (the rows go back as on a failed statement) or the prepare.
class ReplicationLog {
 public:
  virtual ~ReplicationLog() = default;
  virtual Status removed(const QueueTable& table, const std::vector<NamedRow>& rows) = 0;
  // Of the rows the transaction inserts into `table` (in order, those still staged), those
  // at `positions` were dropped as duplicates (DEDUP_COLUMN) or relayed replays: at its
  // prepare or commit, or as another server's log said (drop_staged).
  virtual Status deduplicated(const QueueTable& table, const std::vector<size_t>& positions) = 0;
  // Relayed rows of source `source_id` up to row `last` were received (queue_set_srcid).
  virtual Status relayed(const QueueTable& table, uint32_t source_id, RowId last) = 0;
  // The transaction replaces these dead rows by copies at the queue's end (queue_redrive_dead).
  virtual Status redriven(const QueueTable& table, const std::vector<NamedRow>& rows) = 0;
  // Whether the log redoes this transaction's prepared part in `table` after a power cut
  // (core/table/redo.h): then the prepare writes it without a sync and hands its redo to
  // prepared() (which must write it where the log's own sync covers it, or fail).
  virtual bool redoes(const QueueTable&) { return false; }
  virtual Status prepared(const QueueTable&, const std::string& /*redo*/) { return Status::Ok(); }
};

class Transaction {
 public:
  explicit Transaction(uint64_t connection_id);
  ~Transaction();  // rolls back what is still open
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Who holds the rows it removes (RowEntry::holder).
  const Holder& holder() const { return holder_; }
  // Whether it is a whole transaction (BEGIN ... COMMIT, XA, or one committed at once), not
  // an autocommit statement's own (the binary log's two-phase commit of one statement): only
  // a whole one takes a subscription's ends (QueueTable::ends_in_transactions).
  void set_whole(bool whole) { whole_ = whole; }
  bool whole() const { return whole_; }
  // Whether a one-phase commit that only removes rows waits for their sync in a durable sync
  // mode (queue_sync_removals; default true). Rows it inserts are synced either way.
  void set_sync_removals(bool sync) { holder_.set_sync_removals(sync); }

  // ---- changes
  // `asked`: the id the row asks for (ROW_ID_COLUMN; 0: none), given at the commit if free
  // (core/row/id_sequence.h).
  void insert(const std::shared_ptr<QueueTable>& table, std::string row, RowId asked = 0);
  // The rows `ids` that `owner` owns in `table` become this transaction's, to remove at commit.
  // kLeaseExpired if their lease ran out first (then they went back to the queue). Rows a
  // copying ALTER TABLE moved are claimed in the table that took `table` over, where they
  // are owned now. `frees_slot`: the end inside the owner's next take (QueueTable::claim_owned).
  Status remove_owned(const std::shared_ptr<QueueTable>& table, const Holder& owner, const RowId* ids, size_t count,
                      bool frees_slot = false);
  // Up to `max` of the rows of `table` past MESSAGE_TTL that its expiry claimed (left to a
  // logged transaction: ExpiryLog), oldest first; *count = how many.
  Status remove_expired(const std::shared_ptr<QueueTable>& table, size_t max, size_t* count);
  // The rows another server's binary log says were removed (QueueTable::claim_named).
  Status remove_named(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows);
  // queue_purge_dead(): up to `max` dead rows of `table`, oldest first; *count = how many.
  Status remove_dead(const std::shared_ptr<QueueTable>& table, size_t max, size_t* count);
  // queue_redrive_dead(): up to `max` dead rows of `table` (oldest first, not those set aside
  // for damaged bytes) are removed at the end and replaced by copies staged now, in that
  // order (insert time kept, delivery count 0; DEDUP_COLUMN drops none). *count = how many.
  Status redrive_dead(const std::shared_ptr<QueueTable>& table, size_t max, size_t* count);
  // The rows another server's binary log says were redriven there (queue_apply_redrive),
  // checked as remove_named() checks them.
  Status redrive_named(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows);
  // Where remove_owned(), remove_visible(), remove_named() and remove_dead() report their rows
  // (null: nowhere). Not owned.
  void set_replication_log(ReplicationLog* log) { replication_log_ = log; }
  // Rows `table` itself claimed for this transaction (a replica applying a subscription's ends
  // inside its applier's transaction, Subscriptions::apply_ends_in): logged as its claims, so
  // that the transaction's end (and a savepoint's) reaches the table.
  void note_claims(const std::shared_ptr<QueueTable>& table, const std::vector<RowId>& ids) {
    std::vector<NamedRow> rows;
    for (RowId id : ids) rows.push_back(NamedRow{id, 0, 0});
    log_claims(table, rows, false);
  }
  // A DELETE: claims row `id` of `table` if `viewer` (the transaction's connection) sees it;
  // reported to the removal log like the others (false if that fails: nothing claimed).
  bool remove_visible(const std::shared_ptr<QueueTable>& table, Consumer* viewer, RowId id);

  // The rows it inserted into `table` so far, as its own connection's scans see them (a row
  // deleted again is empty and skipped): index i is stable for the transaction's life.
  size_t staged(const QueueTable* table) const;
  const std::string* staged_row(const QueueTable* table, size_t i) const;  // null if deleted
  void unstage(const QueueTable* table, size_t i);  // the connection DELETEs its own new row

  // ---- relayed rows (queue_set_srcid)
  // A row of another server's queue, as insert(): `tag` says whose. Admitted with the others
  // at the end: one received before (by then, or earlier in this transaction) is dropped.
  void insert_relayed(const std::shared_ptr<QueueTable>& table, std::string row, const RelayTag& tag);
  // Another server's record of relay source `source`'s last id (queue_apply_srcid), set at
  // the end with the rest.
  void record_relay(const std::shared_ptr<QueueTable>& table, uint32_t source, RowId last);
  // What the last prepare() or one-phase commit() dropped as received before: per table and
  // source, how many of how many relayed rows, and the first and last of their source ids.
  struct Replays {
    const QueueTable* table;
    uint32_t source;
    size_t dropped;
    size_t relayed;
    RowId first;
    RowId last;
    RowId recorded;  // the table's last id of `source` then: why they were dropped
  };
  const std::vector<Replays>& replays() const { return replays_; }
  // What the last prepare() or one-phase commit() dropped as duplicates (DEDUP_COLUMN): per
  // table, how many of its new rows. The engine notes them on the statement that ends the
  // transaction (the drop is decided there, not at the INSERT).
  struct Duplicates {
    const QueueTable* table;
    size_t dropped;
  };
  const std::vector<Duplicates>& duplicates() const { return duplicates_; }

  // ---- another server's decisions
  // Its rows come from another server's binary log (a replica's applier): DEDUP_COLUMN drops
  // none of them at the end; that server's log names the ones it dropped (drop_staged).
  // `insert_time_ms`: when that server inserted them (0 = at the end here).
  void set_decided(bool decided, uint64_t insert_time_ms = 0) {
    decided_ = decided;
    insert_time_ms_ = decided ? insert_time_ms : 0;
  }
  // Drops the staged rows of `table` at `positions` (increasing) among the rows staged now,
  // as duplicates another server dropped; kInvalid (nothing dropped) if one is not staged.
  Status drop_staged(const std::shared_ptr<QueueTable>& table, const std::vector<size_t>& positions);

  // ---- savepoints and statements
  size_t mark() const { return log_.size(); }
  void rollback_to(size_t mark);  // undoes every change made since mark()

  // ---- the end
  // Two-phase commit, first phase: every table's part written durably with `xid` (an opaque
  // name the server gives the transaction), applied by nothing yet (QueueTable::prepare_part).
  // On failure the parts prepared so far are rolled back; *failed names the table.
  Status prepare(std::string_view xid, const QueueTable** failed = nullptr);
  bool prepared() const { return prepared_; }
  // Writes every table's part: a prepared one is ended, else its rows and removals go in one
  // commit. On failure the parts not written yet are rolled back; parts written stay
  // written; *failed (if given) names the table whose part failed.
  Status commit(const QueueTable** failed = nullptr);
  // For a prepared transaction, in the coordinator's commit order (MariaDB's commit_ordered,
  // which may call it from another connection's thread while this one's waits): each part's
  // end is queued in its table at once, so that tables place the rows of transactions in that
  // order; commit() then waits for them. Never blocks on a sync; a part it cannot queue is
  // ended by commit() as without it.
  // durable false: the commit records wait for no sync (QueueTable::queue_end_part).
  void queue_commit(bool durable = true);
  void rollback();
  // A prepared XA transaction whose connection goes: its parts stay prepared in their tables,
  // to be ended by xid later (QueueTable::prepared_parts()); this object forgets them.
  void detach();
  bool empty() const { return log_.empty(); }

 private:
  struct Part {
    std::shared_ptr<QueueTable> table;
    std::vector<std::string> rows;  // in insert order
    std::vector<bool> unstaged;     // rows[i] was deleted again (or rolled back)
    std::vector<RelayTag> tags;     // whose rows[i] is (id 0: a plain row)
    bool relays = false;            // a tag has an id
    std::vector<RowHistory> histories;  // what rows[i] carries (a redrive's copy: its insert time)
    bool copies = false;                // a row is a copy
    std::vector<RowId> asked;           // the id rows[i] asks for (0: none)
    bool asks = false;                  // a row asks for one
    size_t redriven = 0;                // dead rows it replaces by copies (counted at commit)
    size_t expired = 0;                 // rows past MESSAGE_TTL it removes (counted at commit)
    std::vector<fmt::SourceMark> records;  // record_relay()
    size_t claimed = 0;             // rows claimed here
    size_t consumed = 0;            // of them, rows its consumer ended (counted at commit)
    uint64_t prepared = 0;          // its id in the table once prepared (0: not)
    std::unique_ptr<QueueTable::QueuedEnd> queued;  // its end, queued by queue_commit()
  };
  struct Change {
    size_t part;
    bool insert;  // else a claim (or a relay record)
    bool consumed;  // a claim of a row its consumer ended (else a DELETE's)
    RowId id;     // a claim's row; an insert's index in rows
    bool record = false;  // a record_relay(), the last of records
    bool redriven = false;  // a claim of a row a copy replaces
    bool expired = false;   // a claim of a row past MESSAGE_TTL
  };
  Part& part_of(const std::shared_ptr<QueueTable>& table);
  void log_claims(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows, bool consumed);
  // log_claims(), then the removal log told (its failure undoes them); *count = rows.
  // `tell_log` false: the table logs them itself (a subscription's ends: SubscriptionLog).
  Status log_removal(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows, bool consumed,
                     size_t* count, bool tell_log = true);
  Status finish_queued(Part& p);
  void count_ended(const Part& p);  // its consumed, redriven and expired rows, once it committed
  const Part* find(const QueueTable* table) const;
  void clear();

  std::vector<std::string_view> rows_of(const Part& p) const;
  std::vector<RelayTag> tags_of(const Part& p) const;  // as rows_of()
  std::vector<RowHistory> histories_of(const Part& p) const;  // as rows_of()
  std::vector<RowId> asked_of(const Part& p) const;  // as rows_of()
  void stage(Part& p, std::string row, const RelayTag& tag, const RowHistory* history, RowId asked = 0);
  // The claimed `rows` of `table` (not logged yet) go at the end; copies of them are staged.
  Status redrive(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows);

  Holder holder_;
  std::vector<Part> parts_;
  std::vector<Change> log_;
  // What the admission of a part's staged rows points into.
  struct Staged {
    std::vector<RelayTag> tags;
    std::vector<RowHistory> histories;
    std::vector<RowId> asked;
  };
  // How part `p`'s staged rows are admitted (set_decided, their tags, histories and asked
  // ids, which *staged holds).
  QueueTable::Admission admission_of(const Part& p, Staged* staged) const;
  // `before`: each relay source's last id before the part was written (a one-phase commit
  // reads the table after it, when the part's own rows count); null: the table's now.
  void note_replays(const Part& p, const std::vector<RelayTag>& tags, const QueueTable::Admission& a,
                    const std::vector<fmt::SourceMark>* before = nullptr);
  std::vector<fmt::SourceMark> last_relayed(const Part& p, const std::vector<RelayTag>& tags) const;
  std::vector<Replays> replays_;
  void note_duplicates(const Part& p, const QueueTable::Admission& a);
  std::vector<Duplicates> duplicates_;

  bool prepared_ = false;
  bool whole_ = true;
  bool decided_ = false;
  uint64_t insert_time_ms_ = 0;
  ReplicationLog* replication_log_ = nullptr;
};

}  // namespace q4m
