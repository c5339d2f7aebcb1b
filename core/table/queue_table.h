// QueueTable: one queue table = one append-only data file + its in-memory index. What the
// engine, the SQL functions and Consumer see of a table; thread-safe. One instance per
// table, shared through TableRegistry (registry.h). The one implementation is Table
// (table.h).
//
// Visibility rules (Q4M semantics):
//  - a row a connection holds (owns, or claimed for a DELETE) is visible only to it;
//  - a connection in owner mode sees only its owned row(s), and nothing in other tables; one
//    in owner mode owning no row (its wait returned 0, as in Q4M) sees nothing;
//  - other rows are visible to everybody;
//  - a backup's scan (View::sees_held) also sees the rows others hold: they are in flight.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/file/write_batch.h"
#include "core/policy/group_order.h"
#include "core/policy/options.h"
#include "core/policy/table_stats.h"
#include "core/row/ended_row.h"
#include "core/row/filter.h"
#include "core/row/history.h"
#include "core/row/id_sequence.h"
#include "core/row/holder.h"
#include "core/row/row_id.h"
#include "core/table/snapshot_journal.h"
#include "core/util/status.h"

namespace q4m {

class Consumer;
class QueueTable;
class Subscriptions;

// A row as another server's binary log names it: its id, its payload's length and its
// checksum (crc32c of id and payload, as the file stores it), which must all match here: ids
// agree between servers that placed the same rows in the same order, and the checksum
// tells when they do not.
struct NamedRow {
  RowId id;
  uint32_t length;
  uint32_t checksum;
  // HISTORY_RETENTION: how the row ends here and its delivery count, so that a replica keeps
  // the same history (0: the table keeps none; a replica then records a consumption).
  uint8_t end_kind = 0;
  uint16_t deliveries = 0;
};

// A row a connection owns (queue_wait, queue_wait_batch): INFORMATION_SCHEMA.QUEUE_OWNED_ROWS.
struct OwnedRowInfo {
  RowId id = 0;
  uint64_t connection_id = 0;  // its holder's
  uint32_t deliveries = 0;     // this delivery included
  uint64_t row_age_ms = 0;     // since its INSERT
  uint64_t owned_ms = 0;       // since it was handed out (a batch: since its first row)
  int64_t lease_left_ms = -1;  // until its lease runs out (0 = due now); -1 = no lease
};

// A message group holding rows back (its order, GROUP_CONCURRENCY, GROUP_RATE):
// INFORMATION_SCHEMA.QUEUE_HELD_GROUPS.
using HeldGroupInfo = GroupOrder::HeldGroup;

// What a connection's scan may see (the visibility rules above), as its Consumer says.
struct View {
  const Holder* holder = nullptr;
  const QueueTable* owned_in = nullptr;        // owner mode: the table it owns rows in
  RowId owned = 0;                             // its row there (the lowest of a batch)
  const std::vector<RowId>* batch = nullptr;   // a batch's rows, ascending; null for one row
  bool owns_nothing = false;                   // owner mode owning no row: sees nothing anywhere
  // A backup's read (Consumer::set_sees_held): rows other connections hold are in flight, not
  // consumed, so they are seen as queued ones.
  bool sees_held = false;
  // Whether every row of `t` is invisible to it (it is in owner mode for another table, or
  // for none). Defined below QueueTable.
  bool sees_nothing_in(const QueueTable* t) const;
};

// Where a taken row goes: the consumer's side of a hand-off (consumer.cc). Called by a
// table under its state lock.
class Receiver {
 public:
  virtual ~Receiver() = default;
  // Whether the receiver takes row `id` as delivery number `deliveries` (`prior_deliveries`
  // before this one) for its subscription `sub` (false: it stopped waiting, or has its row
  // already).
  virtual bool accept(int sub, RowId id, uint32_t deliveries, uint32_t prior_deliveries) = 0;
  // Whether it still waits for a row (else a table does not register it as a waiter).
  virtual bool waiting() = 0;
  // A table it waits on with a condition was closed (MAX_IN_FLIGHT, MAX_RATE) and opened
  // again: the table no longer lists it as a waiter, and it takes (or registers) again.
  virtual void rescan() = 0;
  virtual void table_dropped(const std::string& message) = 0;
};

// One take (queue_wait, a batch's next row, queue_take_dead).
struct TakeRequest {
  Receiver* receiver = nullptr;
  const Holder* holder = nullptr;
  int sub = 0;                               // the subscription's index, for the receiver
  std::shared_ptr<const RowFilter> filter;   // null = any row
  int64_t lease_ms = 0;                      // the lease of the rows taken (0 = none)
  bool more = false;                         // one more row for the holder's batch
  // A row handed to it while it waits (not one taken at once) is provisional: not leased
  // until the receiver keeps it (keep_handed), or given back untouched (give_back).
  bool provisional = false;
};

class QueueTable {
 public:
  virtual ~QueueTable() = default;

  // ---- producers -------------------------------------------------------
  // Appends rows; returns once durable per settings().sync() (group commit with every other
  // concurrent insert/remove on this table), then hands rows to waiters. `ids` (optional)
  // receives the assigned row ids. With a DEDUP_COLUMN, rows whose key was inserted within
  // the window are not written: *deduplicated (optional) counts them, and `ids` has none.
  // `asked` (optional): the id each row asks for (WriteBatch::asked).
  virtual Status insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids,
                        size_t* deduplicated = nullptr, const RowId* asked = nullptr) = 0;
  // Relay dedup (queue_set_srcid): rows[i] is row source_rowids[i] of source_id; the ids
  // strictly increase. Rows whose id is not newer than the last one recorded for source_id
  // were received before: they are dropped (always a prefix, counted in *replayed). The rest
  // are appended in one chunk with the new last id. reset=true (mode 'w') forgets the
  // previous last id first.
  // *dropped (optional): the indices of every row not written, replays and duplicates.
  virtual Status insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id,
                                const RowId* source_rowids, bool reset, size_t* replayed,
                                std::vector<size_t>* dropped = nullptr) = 0;
  virtual RowId last_relayed_rowid(uint32_t source_id) = 0;  // 0 if none
  // A copy's rows: as insert(), each with what it had been through (history[i] for rows[i]),
  // given in the order they were inserted. Rows with an id keep it: ids must increase, from
  // the table's next id on (else kInvalid, nothing written).
  virtual Status insert_with_history(const std::vector<std::string_view>& rows,
                                     const std::vector<RowHistory>& history, const RowId* asked = nullptr) = 0;

  // The end of a copying ALTER TABLE (core/table/takeover.cc): this table, which the copy
  // filled with `old`'s rows by insert_with_history(), becomes the queue `old` was. With
  // `ids_kept` (the rows kept their ids), each row takes the state it has in `old` now: rows
  // consumed meanwhile are removed, the rows a connection owns stay its own (delivery
  // count, lease, message group), rows returned meanwhile keep their delivery. Without,
  // nothing may have changed in `old` since the copy began (kInvalid, `old` untouched).
  // Either way this table's next id is at least `old`'s (a relay's dedup never takes a new
  // row for a replay), it keeps `old`'s relay records (queue_set_srcid), and from then on
  // `old` hands out no row and passes its holders' ends, aborts and lease calls on here
  // (moved_to()). All of it is synced before the call returns. If this table is dropped
  // while `old` still stands (the ALTER failed after all), `old` takes its rows back the
  // same way.
  virtual Status take_over(const std::shared_ptr<QueueTable>& old, bool ids_kept) = 0;
  // The table that took over this one's rows (take_over), or null.
  virtual const QueueTable* moved_to() const = 0;
  // The same, owned: where a holder's call that answered kMoved goes next.
  virtual std::shared_ptr<QueueTable> moved_to_table() = 0;

  // ---- SQL scans (handler) ---------------------------------------------
  // Every payload read from disk is checked against its row's checksum first: a row whose
  // bytes fail gives kDamaged (naming the file, the row and its offset) instead of the bytes,
  // and is set aside as a dead row if it was queued or `viewer`/`reader` held it from a wait
  // (docs/recovery.md "Damaged rows"); the other rows read as before.
  // Next row visible to `viewer` (null = a connection with no Consumer) with id > after.
  virtual Status next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload,
                              bool* found) = 0;
  virtual Status read_row(RowId id, std::string* payload, bool* found, const Consumer* reader = nullptr) = 0;
  // Next live row with id > after whoever holds it (copying ALTER TABLE), and (if `history`
  // is not null) what it has been through, for insert_with_history().
  virtual Status next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) = 0;
  virtual uint64_t visible_count(const Consumer* viewer) = 0;  // instant
  // A consistent snapshot's read (core/table/snapshots.h; mariadb-dump --single-transaction):
  // the rows the table held at snapshot `point`, queued or held, whatever became of them
  // since, in id order. Read each with read_snapshot_row() while the snapshot is open.
  virtual Status snapshot_rows(uint64_t point, std::vector<SnapshotRow>* rows) = 0;
  virtual Status snapshot_count(uint64_t point, uint64_t* count) = 0;  // how many (COUNT(*))
  virtual Status read_snapshot_row(const SnapshotRow& row, std::string* payload) = 0;
  // History (HISTORY_RETENTION): the rows that ended within the retention period, in id
  // order, and the file their offsets are in (compaction may replace the table's meanwhile:
  // read them from this one, with read_history_row()).
  virtual Status history_rows(std::vector<EndedRow>* rows, std::shared_ptr<DataFile>* file) = 0;
  virtual Status read_history_row(const std::shared_ptr<DataFile>& file, const EndedRow& row, std::string* payload) = 0;
  // Forgets what no open snapshot needs any more (a snapshot ended): the rows removed since,
  // and the files they were in.
  virtual void prune_snapshot_journal() = 0;

  // DELETE: claim a visible row for removal (false if it is gone or held by another
  // connection), then remove all claimed rows durably in one commit. Claimed rows are
  // invisible to others; if the consumer goes away before remove_claimed they return.
  // `as`: the claim is held by this holder instead of the viewer's (its transaction's).
  // `named` (if given) receives the row as a binary log names it (its bytes read: if that
  // fails, nothing is claimed).
  virtual bool claim_for_delete(Consumer* viewer, RowId id, const Holder* as = nullptr, NamedRow* named = nullptr) = 0;
  virtual Status remove_claimed(Consumer* viewer) = 0;

  // ---- maintenance -------------------------------------------------------
  virtual Status truncate() = 0;  // removes every row, owned ones too; waiters keep waiting
  virtual Status compact() = 0;   // rewrites live rows into a new file (ids kept)
  // A backup's copy: the data file's bytes as of now (no commit or file replacement runs
  // meanwhile) into `dest`, synced. Opened there it recovers like a file after a crash.
  virtual Status copy_data(const std::string& dest) = 0;
  // What the table's definition asks (policy/options.h): each policy takes its part. Called
  // whenever a statement opens the table; cheap when `options` is the value it already has.
  virtual void configure(std::shared_ptr<const TableOptions> options) = 0;
  virtual std::shared_ptr<const TableOptions> options() const = 0;  // never null

  // ---- operators (queue_release_owned, queue_redrive_dead, queue_purge_dead) ----
  // Gives row `id`, owned by some connection, back to the queue with every other row its
  // owner holds in this table (a batch), exactly as if their lease had run out: delivery
  // counts kept (a RETURN record), MAX_DELIVERIES applies, and the owner's next end() or
  // wait() reports kLeaseExpired ("given back by connection `by_connection`") and leaves
  // owner mode. An end() already being committed wins: the rows are then gone.
  // *released = rows given back (0: the row is not owned, or is gone).
  virtual Status release_owned(RowId id, uint64_t by_connection, size_t* released) = 0;
  // Puts up to `max` dead rows (oldest first) back in the queue: each is replaced by a copy
  // with a new id at the queue's end, its insert time kept and its delivery count at 0. The
  // copies and the removal of the dead rows share one chunk (a crash keeps one or the other,
  // never both), synced like an INSERT. *moved = rows queued again.
  virtual Status redrive_dead(size_t max, size_t* moved) = 0;
  // Removes up to `max` dead rows (oldest first) durably. *purged = rows removed.
  virtual Status purge_dead(size_t max, size_t* purged) = 0;
  // What row `id` is to `viewer` (the row a scan reads: queue_scan_state()).
  enum class RowView { kGone, kQueued, kDelayed, kDead, kOwnedByViewer, kHeld };
  virtual RowView row_view(RowId id, const Consumer* viewer) = 0;

  virtual TableStats info() = 0;
  // Where row ids stand (instant): the next id and the floor (id_sequence.h).
  virtual IdSequence ids() const = 0;
  // Rows that ask for no id get ids from `floor` on (CREATE/ALTER TABLE ... AUTO_INCREMENT),
  // durably (ID_FLOOR record); a floor at or below the table's changes nothing.
  virtual Status raise_id_floor(RowId floor) = 0;
  // The id the next row asking for none got at a consistent snapshot's point (SHOW CREATE
  // TABLE's AUTO_INCREMENT in a dump's transaction).
  virtual RowId snapshot_upcoming_id(uint64_t point) = 0;
  // The rows connections own now, in row-id order (rows claimed by a running DELETE are not
  // listed). Not one atomic snapshot: the index is read in slices.
  virtual std::vector<OwnedRowInfo> owned_rows() = 0;
  // Up to `max` message groups holding rows back, the most held back first (O(groups)).
  virtual std::vector<HeldGroupInfo> held_groups(size_t max) = 0;
  virtual TableCounters& counters() = 0;
  virtual const std::string& path() const = 0;

  // ---- Consumer (consumer.cc) -------------------------------------------
  // kFailed: the table could not read what the take needed (take_failure() says what).
  enum class Take { kTaken, kRegistered, kNone, kConsumerDone, kDropped, kFailed };
  // Gives the first takeable row matching r.filter to r.receiver (if it still accepts one),
  // else registers it as a waiter when `register_waiter`, to be handed the next such row.
  // A table whose rows moved (take_over) hands out nothing.
  virtual Take take(const TakeRequest& r, bool register_waiter) = 0;
  virtual Take take_dead(const TakeRequest& r) = 0;  // the oldest dead row (MAX_DELIVERIES)
  virtual void unregister(const Receiver* r) = 0;
  // keep_handed, give_back, end_rows, abort_rows, settle_lease and renew_lease on a table
  // whose rows moved (take_over) go to the table they moved to.
  // A provisional hand-off (TakeRequest::provisional) the holder keeps: its lease of `lease`
  // (0 = none) starts now. Nothing if the holder no longer holds the row (TRUNCATE, DROP,
  // queue_release_owned: its owner learns it as for any row).
  virtual void keep_handed(const Holder* h, RowId id, std::chrono::milliseconds lease) = 0;
  // One it does not keep (it took an earlier listed subscription's row): free again as if it
  // had never been handed out, its delivery count `deliveries` as before, no RETURN record;
  // placed and offered to the waiters as any row coming back. Nothing if the holder no longer
  // holds it.
  virtual void give_back(const Holder* h, RowId id, uint32_t deliveries) = 0;
  // Removal of the holder's rows `ids` in one commit (synced unless the holder waived it);
  // Ok for rows that vanished (TRUNCATE, DROP).
  virtual Status end_rows(const Holder* h, const RowId* ids, size_t count) = 0;
  // The holder's rows back to the queue (after `delay`, a retry); rows it no longer holds
  // (a lease ran out, a DELETE removed them) are skipped. Their delivery counts and delays
  // go into a RETURN record.
  // Returns how many went back.
  virtual size_t abort_rows(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds delay) = 0;
  // Before end_rows() of leased rows: kLeaseExpired if their lease ran out (they went back,
  // and were not removed), else the lease is cancelled. (policy/leases.h)
  virtual Status settle_lease(const Holder* h, RowId first, size_t count) = 0;
  virtual Status renew_lease(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds lease) = 0;
  // The rows `h` claimed (all, or `ids`) back to the queue, their delivery counts kept (a
  // RETURN record): a DELETE that failed or went away, a transaction rolled back.
  virtual void release_claims(const Holder* h, const RowId* ids = nullptr, size_t count = 0) = 0;

  // ---- Transactions (transaction.h) --------------------------------------
  // The rows `ids` that `owner` owns are now held by `as`, claimed for removal; their lease
  // is settled (kLeaseExpired if it ran out first: then they went back). Rows `owner` no
  // longer owns (TRUNCATE, DROP) are skipped.
  // `named` (if given) receives the rows claimed, checksums read (the caller logs them);
  // reading a row fails the claim (nothing claimed).
  // kMoved (nothing claimed) once a copying ALTER TABLE moved the rows: the caller claims
  // them in moved_to_table(), where they are owned now (a transaction's part must be there).
  // `frees_slot`: the end inside the owner's next take (queue_wait): the rows give up their
  // message group's place and their MAX_IN_FLIGHT slot now, so that the take may use them,
  // instead of at the transaction's end (Move::frees_slot).
  virtual Status claim_owned(const Holder* owner, const RowId* ids, size_t count, const Holder* as,
                             std::vector<NamedRow>* named = nullptr, bool frees_slot = false) = 0;
  // The rows another server removed (its binary log, applied here): each must be in the queue
  // (held by no one) with the length and checksum named, else nothing is claimed and the
  // error names the first row that is not (kNotFound: no such row; kInvalid: other bytes,
  // or held). The
  // rows are then held by `as`, claimed for removal.
  // A row named that is not here but was (its id is below the next one) is skipped on a
  // table with MESSAGE_TTL: a server that expired it itself (a replica expires none while it
  // is read-only or applies a log; one that is neither acts as a primary).
  virtual Status claim_named(const NamedRow* rows, size_t count, const Holder* as) = 0;
  // queue_purge_dead in a transaction: claims up to `max` dead rows, oldest first, named;
  // `copyable`: only rows whose bytes can be copied (queue_redrive_dead: not the damaged ones).
  virtual Status claim_dead_rows(size_t max, const Holder* as, std::vector<NamedRow>* named,
                                 bool copyable = false) = 0;
  // Up to `max` of the rows MESSAGE_TTL's expiry claimed (left to a logged transaction:
  // ExpiryLog), oldest first, are held by `as` now, named.
  virtual Status claim_expired_rows(const Holder* as, size_t max, std::vector<NamedRow>* named) = 0;
  // The bytes and insert times of rows `as` claimed (a redrive's copies keep the time).
  struct RowCopy {
    std::string payload;
    uint64_t insert_time_ms = 0;
  };
  virtual Status copy_claimed(const Holder* as, const std::vector<NamedRow>& rows, std::vector<RowCopy>* out) = 0;
  // How a part's new rows are admitted (DEDUP_COLUMN).
  struct Admission {
    // in: another server admitted them (WriteBatch::decided): none is dropped here.
    bool decided = false;
    // in: when that server inserted them (WriteBatch::insert_time_ms; 0 = now).
    uint64_t insert_time_ms = 0;
    // in: whose rows they are, one tag per row (null: plain rows): relayed rows received
    // before are dropped (queue_set_srcid).
    const RelayTag* relay = nullptr;
    // in: what the rows carry (a redrive's copies: their insert times), one per row (null:
    // new rows).
    const RowHistory* history = nullptr;
    // in: the id each row asks for (WriteBatch::asked), one per row (null: none asks).
    const RowId* asked = nullptr;
    // in: relay sources' last ids the part sets without rows (queue_apply_srcid).
    std::vector<fmt::SourceMark> relay_records;
    // out: the rows (indices into the part's rows) dropped as duplicates or replays.
    std::vector<size_t> dropped;
    // out: of them, the replays; and the relay sources' last ids the part sets.
    std::vector<size_t> replayed;
    std::vector<fmt::SourceMark> relayed;
    // in (a prepare): the binary log redoes the part after a power cut (core/table/redo.h):
    // it is written without a sync of its own; out: its redo for the binary log ("" if it
    // was synced instead).
    bool redo = false;
    std::string redo_record;

    void fill(WriteBatch& b) const {
      if (redo) b.redo_requested = true, b.sync = false;
      b.decided = decided;
      b.insert_time_ms = insert_time_ms;
      b.history = history;
      b.asked = asked;
      b.relay = relay;
      b.relay_records = relay_records.data();
      b.relay_record_count = relay_records.size();
    }
    void learn(const WriteBatch& b) {
      dropped = b.dropped_rows();
      replayed = b.replays;
      relayed = b.relay_marks;
      redo_record = b.redo;
    }
  };
  // One commit of a transaction's part: `rows` inserted and every row `txn` claimed removed,
  // atomically. On failure nothing of it is written and the claims stay.
  virtual Status commit_part(const Holder* txn, const std::vector<std::string_view>& rows, Admission* admission) = 0;
  // Two-phase commit of a part: prepare_part() writes `rows` and the removal of every row
  // `txn` claimed, durably and with `xid`, but applies nothing (the rows are not in the
  // table; the claimed rows stay held, by the part from now on); *id names the part. Its
  // admission (MAX_ROWS, dedup) happens here, so that its end cannot be refused. end_part()
  // then applies it (commit) or drops it (its claimed rows go back to the queue). A part
  // survives a restart until it is ended (prepared_parts()).
  virtual Status prepare_part(const Holder* txn, const std::vector<std::string_view>& rows, std::string_view xid,
                              uint64_t* id, Admission* admission = nullptr) = 0;
  virtual Status end_part(uint64_t id, bool commit) = 0;
  // The commit of a prepared part in two steps, for a coordinator that orders commits
  // (MariaDB's commit_ordered): queue_end_part() places it in the table's write queue and
  // returns at once; finish_end_part() waits until it is written. Parts queued in an order
  // are written, and their rows placed (their ids given), in that order. A QueuedEnd lives
  // until finish_end_part() returned on it.
  class QueuedEnd {
   public:
    virtual ~QueuedEnd() = default;
  };
  // `durable` false: its commit record is written but waits for no sync (a coordinator that
  // can recover the transaction until sync_commits() says so: MariaDB's binary log, through
  // commit_checkpoint_request). Its rows are handed out once written.
  virtual Status queue_end_part(uint64_t id, std::unique_ptr<QueuedEnd>* out, bool durable = true) = 0;
  // Makes durable every commit written or queued so far (one sync, if anything is unsynced).
  virtual Status sync_commits() = 0;
  // The background sync's pass (background_sync.h): syncs the file if anything written is
  // unsynced, else marks a flagged tail as synced. Takes the writer turn for that long.
  virtual Status sync_in_background() { return Status::Ok(); }
  virtual Status finish_end_part(QueuedEnd& end) = 0;
  struct PreparedPartInfo {
    uint64_t id;
    std::string xid;
  };
  virtual std::vector<PreparedPartInfo> prepared_parts() = 0;
  virtual Status dropped_status() const = 0;          // what a take or write on a dropped table answers
  // Why the last take that answered kFailed failed (a cold block of its row index the data
  // file could not give back: kDamaged, naming the file).
  virtual Status take_failure() { return Status(ErrorCode::kIo, "file " + path() + ": a take failed"); }

  // ---- Subscriptions (core/table/subscriptions.h)
  // The table's subscriptions (null: none can be made, e.g. a subscription itself).
  virtual Subscriptions* subscriptions() { return nullptr; }
  // Whether an owner's end joins its connection's transaction also when that is only an
  // autocommit statement's own (Transaction::whole() false: the binary log's two-phase commit
  // of the statement). False: a subscription's, whose autocommit ends commit at once.
  virtual bool ends_in_transactions() const { return true; }
};

// Whether rows owned in table `a` are owned in `b` too: the same table, or the two sides of a
// copying ALTER TABLE's take-over (a statement that opened the old table before the ALTER
// ended still reads its rows there). Walks moved_to(), whose tables each table keeps alive.
inline bool same_queue(const QueueTable* a, const QueueTable* b) {
  if (a == b) return true;
  for (const QueueTable* p = a ? a->moved_to() : nullptr; p; p = p->moved_to())
    if (p == b) return true;
  for (const QueueTable* p = b ? b->moved_to() : nullptr; p; p = p->moved_to())
    if (p == a) return true;
  return false;
}

inline bool View::sees_nothing_in(const QueueTable* t) const {
  return owns_nothing || (owned_in && !same_queue(owned_in, t));
}

// What an owner whose rows another connection gave back (Holder::revoked_by) is told at its
// next queue_end() or queue_wait(): its `count` rows from `first` were not removed.
Status revoked_status(const Holder& h, RowId first, size_t count);

}  // namespace q4m
