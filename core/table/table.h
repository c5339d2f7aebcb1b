// Table: the one implementation of QueueTable (internal header).
//
// Three pieces of shared state, each behind its own lock, always taken in this order:
//   the commit pipeline's queue (short)   pending commits + "a leader is busy"
//   writer_ (long)   what only the current writer touches: the next row id, the file being
//                    appended to, the writer policies; held by the leader for write + sync
//   state_  (short)  the row index and what hangs off it: waiters, scan cursors, delete
//                    claims, the row policies, the readers' file and its caches
//   then a Consumer's mailbox (a hand-off), never the other way round.
//
// Files, one job each:
//   table.cc        open, configure, info, the timer pass
//   writer.cc       the group-commit leader's batch: admission, chunk, write, sync, publish
//   rows.cc         the row lifecycle: the one transition function, placing, hand-offs
//   takes.cc        queue_wait's takes and waiters
//   holdings.cc     what holders do with their rows: abort, keep or give back a hand-off,
//                   leases, DELETE claims
//   operators.cc    what an operator does to rows: release an owner's, redrive or purge dead ones
//   reads.cc        SQL scans, visibility, QUEUE_OWNED_ROWS; reads of rows the caches do not hold
//   damaged_rows.cc a row whose bytes on disk fail their checksum: set aside
//   maintenance.cc  truncate, drop, rename, close;  compaction.cc  compaction
//   takeover.cc     the end of a copying ALTER TABLE: the new table takes over the old one
#pragma once
#include <atomic>
#include <list>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/file/data_file.h"
#include "core/file/recovery.h"
#include "core/file/row_check.h"
#include "core/file/row_source.h"
#include "core/policy/policies.h"
#include "core/table/commit_pipeline.h"
#include "core/table/ended_rows.h"
#include "core/table/snapshot_journal.h"
#include "core/table/queue_table.h"
#include "core/table/read_ahead_window.h"
#include "core/table/reaper.h"
#include "core/table/scan_cursors.h"
#include "core/table/subscriptions.h"
#include "core/table/tail_cache.h"

namespace q4m {

// A row to read outside the table's lock: `file` keeps the right file alive even if
// compaction swaps it meanwhile; `block`, if set, is read instead and kept as read-ahead.
struct UncachedRead {
  std::shared_ptr<DataFile> file;
  RowLocation row;
  std::optional<ReadAheadWindow::Plan> block;
};

class Table final : public QueueTable, public Timed, public std::enable_shared_from_this<Table>, private BatchWriter {
 public:
  // Opens an existing data file with recovery.
  static Status open(const std::string& path, std::shared_ptr<Table>* out);
  ~Table() override;

  // QueueTable
  Status insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids,
                size_t* deduplicated = nullptr, const RowId* asked = nullptr) override;
  Status insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id, const RowId* source_rowids,
                        bool reset, size_t* replayed, std::vector<size_t>* dropped = nullptr) override;
  RowId last_relayed_rowid(uint32_t source_id) override;
  Status insert_with_history(const std::vector<std::string_view>& rows, const std::vector<RowHistory>& history,
                             const RowId* asked = nullptr) override;
  Status take_over(const std::shared_ptr<QueueTable>& old, bool ids_kept) override;
  const QueueTable* moved_to() const override { return successor_raw_.load(std::memory_order_acquire); }
  std::shared_ptr<QueueTable> moved_to_table() override { return successor(); }
  Status next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload, bool* found) override;
  Status read_row(RowId id, std::string* payload, bool* found, const Consumer* reader = nullptr) override;
  Status next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) override;
  uint64_t visible_count(const Consumer* viewer) override;
  Status snapshot_rows(uint64_t point, std::vector<SnapshotRow>* rows) override;
  Status snapshot_count(uint64_t point, uint64_t* count) override;
  Status read_snapshot_row(const SnapshotRow& row, std::string* payload) override;
  Status history_rows(std::vector<EndedRow>* rows, std::shared_ptr<DataFile>* file) override;
  Status read_history_row(const std::shared_ptr<DataFile>& file, const EndedRow& row, std::string* payload) override;
  void prune_snapshot_journal() override;
  bool claim_for_delete(Consumer* viewer, RowId id, const Holder* as = nullptr, NamedRow* named = nullptr) override;
  Status remove_claimed(Consumer* viewer) override;
  Status truncate() override;
  Status compact() override;
  Status copy_data(const std::string& dest) override;
  void configure(std::shared_ptr<const TableOptions> options) override;
  std::shared_ptr<const TableOptions> options() const override;
  Status release_owned(RowId id, uint64_t by_connection, size_t* released) override;
  Status redrive_dead(size_t max, size_t* moved) override;
  Status purge_dead(size_t max, size_t* purged) override;
  RowView row_view(RowId id, const Consumer* viewer) override;
  TableStats info() override;
  IdSequence ids() const override { return IdSequence{next_rowid_.load(), id_floor_.load()}; }
  Status raise_id_floor(RowId floor) override;
  RowId snapshot_upcoming_id(uint64_t point) override;
  std::vector<OwnedRowInfo> owned_rows() override;
  std::vector<HeldGroupInfo> held_groups(size_t max) override;
  TableCounters& counters() override { return counters_; }
  const std::string& path() const override { return *path_.load(std::memory_order_acquire); }
  Take take(const TakeRequest& r, bool register_waiter) override;
  Take take_dead(const TakeRequest& r) override;
  void unregister(const Receiver* r) override;
  void keep_handed(const Holder* h, RowId id, std::chrono::milliseconds lease) override;
  void give_back(const Holder* h, RowId id, uint32_t deliveries) override;
  Status end_rows(const Holder* h, const RowId* ids, size_t count) override;
  size_t abort_rows(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds delay) override;
  Status settle_lease(const Holder* h, RowId first, size_t count) override;
  Status renew_lease(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds lease) override;
  void release_claims(const Holder* h, const RowId* ids = nullptr, size_t count = 0) override;
  Status claim_owned(const Holder* owner, const RowId* ids, size_t count, const Holder* as,
                     std::vector<NamedRow>* named = nullptr, bool frees_slot = false) override;
  Status claim_named(const NamedRow* rows, size_t count, const Holder* as) override;
  Status claim_dead_rows(size_t max, const Holder* as, std::vector<NamedRow>* named, bool copyable = false) override;
  Status claim_expired_rows(const Holder* as, size_t max, std::vector<NamedRow>* named) override;
  Status copy_claimed(const Holder* as, const std::vector<NamedRow>& rows, std::vector<RowCopy>* out) override;
  Status commit_part(const Holder* txn, const std::vector<std::string_view>& rows, Admission* admission) override;
  Status prepare_part(const Holder* txn, const std::vector<std::string_view>& rows, std::string_view xid,
                      uint64_t* id, Admission* admission = nullptr) override;
  Status end_part(uint64_t id, bool commit) override;
  Status queue_end_part(uint64_t id, std::unique_ptr<QueuedEnd>* out, bool durable = true) override;
  Status sync_commits() override;
  Status sync_in_background() override;  // background_sync.cc
  Status finish_end_part(QueuedEnd& end) override;
  std::vector<PreparedPartInfo> prepared_parts() override;
  Status dropped_status() const override;
  Status take_failure() override;
  Subscriptions* subscriptions() override { return &subscriptions_; }

  // Timed (the reaper's thread): every policy's due() pass.
  SteadyClock::time_point due(SteadyClock::time_point now) override;

  // ---- used by TableRegistry ----
  // Waiters get kDropped, rows vanish, file closed. `rows_moved`: the rows live on in another
  // table (a copying ALTER TABLE dropped this one): owners whose rows did not move with
  // take_over() are told their rows were not removed (Holder::rows_moved). A table dropped
  // after it took over from one that still stands gives the rows back to it first.
  void mark_dropped(bool rows_moved = false);
  Status rename_to(const std::string& to);
  void close();  // clean close: leaves an index snapshot (every commit is durable already)

 private:
  friend class Subscriptions;
  friend class SubscriptionTable;
  // ---- subscriptions.cc's view of the table
  RowId plain_below() { return state_.lock()->plain_below; }
  void set_plain_below(RowId below);  // rows from `below` on are the subscriptions'
  uint64_t live_rows_from(RowId id);  // live rows with id >= `id`
  // subscription_gates.cc: the first live row after `after` as a subscription's take sees it.
  struct SubscriptionRow {
    RowId id = 0;
    bool visible = true;   // not held back by VISIBLE_AT_COLUMN
    bool grouped = false;  // MESSAGE_GROUP_COLUMN: `key` is its group
    std::string key;
  };
  bool next_for_subscription(RowId after, SubscriptionRow* out);

  struct Waiter {
    TakeRequest request;
  };

  // What only the group-commit leader (or maintenance holding the writer turn) touches.
  struct Writer {
    std::shared_ptr<DataFile> file;  // appended to by the leader
    IdSequence ids;      // the next row id and the floor (ID_FLOOR)
    std::string buffer;  // reused chunk buffer
    Status broken;       // sticky: after a failed sync the file's content is unknown
    uint64_t generation = 0;  // bumped when the file is replaced other than by compaction
    bool snapshot_written = false;  // close() left an index snapshot: remove before changing the file
    uint64_t next_txn = 1;  // the next prepared part's id
    // Prepared parts whose records are not in the file yet (prepare_unwritten): their end
    // writes them, unless a compaction wrote them into its new file first.
    std::set<uint64_t> unwritten;
    bool tail_flagged = false;  // the last chunk appended is flagged `unsynced` (close() marks it)
    WriterPolicies policies;
  };

  // The rows and everything that hangs off them.
  struct State {
    RowIndex index;
    std::shared_ptr<DataFile> file;  // what readers pread from (swapped by compaction)
    TailCache tail;                  // the newest bytes of `file`, filled by publish()
    ReadAheadWindow window;          // older bytes of `file`, read ahead for a deep backlog
    std::list<Waiter> waiters;       // FIFO
    RowId first_free_hint = 0;       // cursor of the "any row" take
    Status take_failure;             // of the last take that answered kFailed
    // Rows from here on belong to subscriptions (subscriptions.h): plain takes stop before.
    RowId plain_below = ~RowId(0);
    uint64_t free_epoch = 0;         // counts rows becoming takeable (see take())
    ScanCursors cursors;             // of filtered takes
    std::unordered_map<const Holder*, std::vector<RowId>> claims;  // kClaimed rows, by claimer
    uint64_t delayed = 0, dead = 0;  // rows in kDelayed / kDead (kept by move())
    // Transactions' parts prepared and not ended (two-phase commit): their rows (not in the
    // index; id 0), the rows they remove (claimed by `holder` until the end), their xid.
    struct Prepared {
      std::string xid;
      std::vector<RowEntry> rows;
      std::vector<RowId> removals;
      std::unique_ptr<Holder> holder;
      std::vector<fmt::SourceMark> relay;  // its TXN_SRCID records (compaction rewrites them)
      std::vector<RowId> asked;  // its TXN_ASK record: the id each row asks for (empty: none)
      std::vector<RowId> pending;  // removals of rows a part before it gives at its commit (redo.h)
      bool unwritten = false;      // prepared by prepare_unwritten(): its end may write its records
    };
    std::map<uint64_t, Prepared> prepared;
    // What commits changed while a consistent snapshot is open (snapshots.h); `ticket`: the
    // commit being published (0: a change outside one, which takes a ticket of its own).
    SnapshotJournal journal;
    uint64_t ticket = 0;
    RowPolicies policies;
    // HISTORY_RETENTION (history.cc): the rows that ended within it; 0 = none kept.
    EndedRows ended;
    uint64_t history_ms = 0;
    bool dropped = false;
    // A copying ALTER TABLE (takeover.cc). successor: the table that took over this one's
    // rows; this one then hands out no row, and its holders' calls go there.
    std::shared_ptr<Table> successor;
    // The table this one took over from, while that one stands: if this one is dropped
    // first (the ALTER failed after its copy), that one takes the rows back, without the
    // rows removed here since (removed_since_take_over; logged with the ids kept only).
    std::weak_ptr<Table> took_over_from;
    bool took_over_by_id = false;
    std::vector<RowId> removed_since_take_over;

    // Readers now pread `f` (compaction, TRUNCATE, RENAME, open); the tail cache restarts
    // at its end, so rows below it may be read ahead at once.
    void install_file(std::shared_ptr<DataFile> f) {
      tail.reset(f->id(), f->size());
      index.set_source(std::make_shared<FileRowSource>(f));  // cold index blocks read back from it
      file = std::move(f);
    }
    // Rows in `file` with no checksum on disk (format 1 to 4; and rows a prepared transaction
    // committed, as an index snapshot of version 3 or 4 has them): what their bytes must match.
    // A row committed in two phases since is checked with its TXN_ROW's own checksum
    // (RowEntry::txn_row), which costs no memory and lets its block fold.
    KnownChecksums known_sums;
    // Where row `e`'s bytes are in `file` and what they must match.
    RowLocation locate(const RowEntry& e) const {
      RowLocation r{e.id, e.offset, e.length};
      if (const uint32_t* sum = known_sums.empty() ? nullptr : known_sums.find(e.id)) {
        r.stored = false;
        r.known = *sum;
      } else {
        r.id_less = e.txn_row;
      }
      return r;
    }
    // A row's payload from the tail cache (the bytes this process wrote) or the read-ahead
    // window (bytes read from disk, so checked here); false if it is in neither (then
    // uncached_read(), and Table::read_uncached outside the lock). If true, *status says
    // whether the bytes passed their check (kDamaged: *out holds nothing usable).
    bool read_cached(const RowLocation& r, std::string* out, Status* status) const;
    // read_cached(), else a pread under the lock (for the few reads that cannot drop it).
    Status read_here(const RowLocation& r, std::string* out) const;
    // What to pread for a row the caches do not hold. Read ahead only below the tail
    // cache's start: those bytes are published and never change.
    UncachedRead uncached_read(const RowLocation& row) const;
    // fn(e, payload) for each row that want(e) selects, reading the file front to back in
    // 4 MiB blocks. Rows whose bytes cannot be read are skipped: the consumer's own read
    // reports them; those that fail their checksum go to *damaged.
    void for_each_payload(const std::function<bool(const RowEntry&)>& want,
                          const std::function<void(RowEntry&, std::string_view)>& fn, std::vector<RowId>* damaged);
  };

  Table(const std::string& path, std::shared_ptr<DataFile> file, RecoveredTable& rec);  // takes its index
  void restore(RecoveredTable& rec);  // the row policies' opened()

  // ---- table.cc
  RowContext context(State& st);
  // After a hook that may have asked for moves or a wake-up: applies them (recording the
  // RETURNs in *returned, if given), then asks the reaper to pass by the earliest wake-up.
  void finish(State& st, RowContext& ctx, std::vector<fmt::ReturnedRow>* returned = nullptr);
  void watch(SteadyClock::time_point at);  // the reaper calls due() by then
  // Commits the removal of the rows the policies' own holders claimed (MESSAGE_TTL's
  // expiry); outside the state lock.
  void remove_policy_claims();
  void set_path(const std::string& p);

  // ---- reads.cc
  // Row `id`'s payload, read by `reader` (null: no holder; see set_aside()).
  Status read(RowId id, std::string* payload, bool* found, const Holder* reader);
  // Under the state lock: `e`'s payload if a cache holds it (then the status of the read),
  // else nullopt and *r says what read_uncached() is to read outside the lock.
  std::optional<Status> read_locked(State& st, RowEntry& e, const Holder* reader, std::string* payload,
                                    UncachedRead* r);
  // A row the caches did not hold, read outside the state lock and checked; a read-ahead
  // block goes into the window.
  Status read_uncached(const UncachedRead& r, std::string* payload, const Holder* reader);

  // ---- damaged_rows.cc (state lock held)
  // A read of row `id` from disk failed its checksum: counted, and the row is set aside as
  // a dead row (Move::damaged; policy/dead_letters.h) if it is queued, or if `reader` holds
  // it (unless queue_take_dead() lent it out: its taker decides). An owner's next end() then
  // removes none of its rows (Holder::row_set_aside). A row someone else holds stays with it:
  // its holder's own read reports the damage.
  void set_aside(State& st, RowId id, const Holder* reader, RowContext& ctx);
  void set_aside(State& st, const std::vector<RowId>& ids);  // queued rows a scan found: then finish()

  // ---- writer.cc
  Status commit(CommitRequest* req);  // through the pipeline; the leader may compact after
  Status finish(CommitRequest* req);  // the second half of commit(), for a request queued before
  Status after_commit(CommitRequest* req, bool led);  // its status; a leader may compact
  void write_batch(const CommitRequest* leader, std::vector<CommitRequest*>& batch) override;
  // Requests that waived the sync (removals with queue_sync_removals=OFF, returns), in a
  // batch that syncs for others: published and answered once written, before the sync.
  void answer_unsynced(const CommitRequest* leader, std::vector<CommitRequest*>& batch);
  // Commit records that waive the sync (a part's end while the binary log can recover its
  // transaction), in a batch that syncs for others' prepares: published and answered once
  // written, before the sync, up to the first request that gives ids after the sync (rows
  // enter the index in id order).
  void answer_unsynced_ends(const CommitRequest* leader, std::vector<CommitRequest*>& batch, uint64_t base, uint64_t now_ms);
  // The batch's rows and removals go into the index (state lock taken here); `written` (the
  // chunk bytes, now at `base` of `file`) also goes to the tail cache.
  void publish(const std::vector<CommitRequest*>& batch, const DataFile& file, uint64_t base,
               std::string_view written, uint64_t now_ms);
  void publish_locked(State& st, const std::vector<CommitRequest*>& batch, uint64_t base, uint64_t now_ms);
  uint64_t publish_removal(State& st, const WriteBatch& b, RowContext& ctx);  // returns how many
  // A prepared part (its claims move to the part's own holder) / its end: true if a committed
  // row was placed elsewhere than kFree.
  void publish_prepared(State& st, const WriteBatch& b, uint64_t base, uint64_t now, RowContext& ctx);
  // A prepare of removals alone that the binary log redoes, without a write (prepared.cc);
  // false (nothing done) where it does not apply.
  bool prepare_unwritten(const Holder* txn, std::string_view xid, uint64_t* id, std::string* redo);
  // txn_end_end: where its TXN_END record ends in the file.
  bool publish_end(State& st, const WriteBatch& b, uint64_t txn_end_end, RowContext& ctx, uint64_t* inserted,
                   uint64_t* removed);
  void restore_prepared(State& st, RecoveredTable& rec, RowContext& ctx);  // at open
  // kInvalid, naming `what`, while prepared parts wait for their end: DDL would lose them.
  Status refuse_with_prepared(const State& st, const char* what) const;
  Status read_prepared_row(const RowEntry& e, std::string* out);  // a TXN_ROW's bytes, checked
  Status build_end(uint64_t id, bool committed, QueuedEnd* end);  // part id's end as a request
  // After rows went into or out of the index: the lock-free mirrors and the counters.
  void note_index_change(const State& st, uint64_t inserted, uint64_t removed);
  // The table's META record now (next id, floor, counters; `removed` more rows removed).
  fmt::Meta meta_now(const Writer& w, uint64_t removed = 0) const;
  // Where ids stand after a write: the writer's, and the lock-free mirrors ids() reads.
  void set_ids(Writer& w, const IdSequence& ids);
  Status check_row_lengths(const std::vector<std::string_view>& rows) const;
  Status remove_claimed_rows(const Holder* claimer, size_t* removed);
  // Row `e` as a binary log names it (its checksum from its bytes, read here).
  Status name_row(const State& st, const RowEntry& e, NamedRow* out) const;
  // The rows `claimer` holds claimed (verified against the index), and its claims forgotten.
  std::vector<RowId> take_claims(const Holder* claimer);
  // Queued rows (a subscription's, which no plain take hands out) claimed by `as`, for a
  // transaction to remove (subscription_ends.cc); rows not queued are skipped.
  void claim_queued(const std::vector<RowId>& ids, const Holder* as);
  void restore_claims(const Holder* claimer, const std::vector<RowId>& ids);  // what take_claims took, after a commit wrote nothing

  // ---- rows.cc (state lock held)
  // The one way a row changes state (core/row/lifecycle.h): counts, claims, cursors, and
  // every row policy's moved().
  void move(State& st, RowEntry& e, const Move& m, RowContext& ctx);
  // The end of a row's life (kRemoved): out of the index, then every row policy's removed().
  void remove(State& st, RowEntry& e, RowContext& ctx);
  // `e` comes back to the queue, after `delay` if one is asked: where it goes is the
  // policies' placing(); a free row is offered to the waiters.
  void requeue(State& st, RowEntry& e, std::chrono::milliseconds delay, RowContext& ctx);
  // A new row (state kFree, in the index): the policies' added() and placing_new(), then
  // offered unless placed elsewhere. True if it was placed elsewhere.
  bool place_new(State& st, RowEntry& e, std::string_view payload, const RowHistory* history, RowContext& ctx);
  // Offers the rows the gating policies let go since the last call to the waiters, and
  // serves them if the table opened again.
  void release(State& st, RowContext& ctx);
  // The table was closed (open(): a limit of the whole table) and opens again: plain waiters
  // take rows in FIFO order while it stays open, filtered ones scan again themselves
  // (Receiver::rescan).
  void serve_waiters(State& st, RowContext& ctx);
  // Hands a takeable row to the first waiter (FIFO) that still waits and whose filter matches.
  void offer(State& st, RowEntry& e, std::string_view payload_if_known, RowContext& ctx);
  bool takeable(const State& st, const RowEntry& e) const {
    return e.state == RowState::kFree && e.id < st.plain_below && st.policies.all([&](const auto& p) { return p.allows(e); });
  }
  // Whether the table may hand out a row now (every policy's open(): MAX_IN_FLIGHT, MAX_RATE).
  bool open(const State& st) const {
    return st.policies.all([](const auto& p) { return p.open(); });
  }
  bool gated(const State& st, const RowEntry& e) const {
    return st.policies.any([&](const auto& p) { return p.gates(e); });
  }
  // `e` now belongs to r.holder as delivery number `deliveries`; a `provisional` hand-off
  // (TakeRequest::provisional) is not leased nor counted as handed out until it is kept.
  void give(State& st, const TakeRequest& r, RowEntry& e, uint32_t deliveries, RowContext& ctx, bool provisional);
  void handed_out(const RowEntry& e, RowContext& ctx);  // the hand-out wait figure
  // What the file keeps of live row `e` across a restart (RETURN record, compaction, index
  // snapshot); false if nothing.
  bool kept_across_restart(const State& st, const RowEntry& e, fmt::ReturnedRow* out) const;
  void kept_due(const State& st, const RowEntry& e, fmt::ReturnedRow* r) const;  // its retry delay only

  // ---- history.cc (HISTORY_RETENTION)
  // move(): a claim records how its row would end (Move::ends_as); a row leaving its claim
  // forgets it.
  void note_end_kind(State& st, RowId id, RowState from, const Move& m);
  // The writer, before it builds the chunk: how each batch's removed rows end (state lock
  // taken here), for the HISTORY record written with their REMOVE or TXN_END.
  void note_history(std::vector<CommitRequest*>& batch, uint64_t now_ms);
  // Publishing the removal: the rows `remover` holds that `ended` names become history.
  void keep_ended(State& st, const std::vector<fmt::HistoryEntry>& ended, const Holder* remover);
  void expire_history(State& st, uint64_t now_ms);  // forgets what is past the retention
  void restore_history(State& st, RecoveredTable& rec);  // at open
  void note_history_size(const State& st);  // the lock-free mirrors
  // A removal the binary log names: how `e` ends, for a replica's history (if kept here).
  void name_end(const State& st, const RowEntry& e, EndKind kind, NamedRow* named) const;

  // ---- takes.cc
  // The row the plain take (no condition) gets next, or null; moves its cursor up to it.
  RowEntry* next_plain(State& st);
  Take take_locked(State& st, const TakeRequest& r, RowEntry& e, RowContext& ctx);
  Take register_locked(State& st, const TakeRequest& r);
  Take failed_take(State& st);  // kFailed, with the index's read error as take_failure()
  Take moved_take(State& st, const TakeRequest& r, bool register_waiter);  // the rows moved (takeover.cc)
  RowId* cursor_for(State& st, const std::shared_ptr<const RowFilter>& filter);

  // ---- operators.cc
  // Claims up to `max` of the oldest dead rows for `claimer` (hidden from everyone, as a
  // DELETE's claim), only those whose bytes can be copied if `copyable`; *times gets their
  // insert times.
  std::vector<RowId> claim_dead(const Holder* claimer, size_t max, std::vector<uint64_t>* times, Status* dropped,
                                bool copyable = false);

  // ---- snapshot_reads.cc
  // live(st, e) for each row held now that the table held at `point` too, in id order, then
  // gone(row) for each row removed since that it held then: under the state lock, once every
  // commit queued before the point is published.
  template <typename Live, typename Gone>
  Status each_at_point(uint64_t point, Live live, Gone gone);

  // ---- holdings.cc
  // Appends a RETURN record for rows that went back to the queue, without a sync of its own.
  void record_returns(const std::vector<fmt::ReturnedRow>& rows);

  // ---- takeover.cc
  // The table the rows moved to (take_over), or null; state lock taken here.
  std::shared_ptr<Table> successor();
  Status moved_status() const;  // what a commit on a moved table answers
  enum class Adopt { kIdsKept, kNewIds, kGiveBack };
  // This table's rows take the states they have in `src` (see take_over()); the caller holds
  // both tables' writer turns, writer and state locks. kGiveBack: `src` took over from this
  // one and gives the rows back (the ALTER failed after its copy).
  Status adopt(Table& src, Writer& src_w, State& src_st, Writer& w, State& st, Adopt how);
  // Row `t` here takes the state of `s`, its original in `src_st` (deliveries, retry delay,
  // owner), unless a removal claims it here (MESSAGE_TTL).
  void restate(State& st, RowEntry& t, const State& src_st, const RowEntry& s, RowContext& ctx);
  // Before this table is dropped: the table it took over from, if that one still stands,
  // takes the rows back (Adopt::kGiveBack).
  void give_rows_back();
  // The table this one took over from (`dropped`) was dropped: the ALTER went through, there
  // is nothing to give back any more.
  void predecessor_dropped(const Table* dropped);

  // ---- maintenance.cc / compaction.cc
  void forget_rows(State& st);  // every row vanishes (TRUNCATE, DROP)
  Status invalidate_snapshot(Writer& w);
  bool mark_synced(Writer& w);  // close(): maintenance.cc
  void maybe_auto_compact();
  Status compact_now();

  CommitPipeline pipeline_{*this};
  Guarded<Writer> writer_;
  Guarded<State> state_;

  Guarded<std::deque<std::string>> paths_;  // every name this table had; path_ points into it
  std::atomic<const std::string*> path_{nullptr};
  mutable Guarded<std::shared_ptr<const TableOptions>> options_;  // as last configured
  std::atomic<const TableOptions*> configured_{nullptr};  // its address, for the quick check

  // lock-free mirrors for instant info()/visible_count()
  std::atomic<uint64_t> rows_{0}, held_{0}, waiters_{0}, file_bytes_{0}, live_bytes_{0};
  // The row index's memory as last added to global_stats().memory_bytes (note_index_change).
  std::atomic<uint64_t> memory_bytes_{0};
  std::atomic<uint64_t> memory_ticks_{0};
  std::atomic<uint64_t> pending_rows_{0};  // rows of prepared parts (MAX_ROWS counts them)
  std::atomic<RowId> next_rowid_{1};
  std::atomic<RowId> id_floor_{0};
  std::atomic<bool> dropped_{false};
  std::atomic<const Table*> successor_raw_{nullptr};  // State::successor, for lock-free checks
  std::atomic<uint64_t> history_ms_{0};  // State::history_ms, for the writer
  std::atomic<uint64_t> history_rows_{0}, history_bytes_{0};
  std::atomic<bool> timed_{false};  // handed to the Reaper (once)
  std::mutex compaction_mu_;  // one compaction at a time (serializes the operation only)
  uint64_t torn_tail_bytes_ = 0;
  TableCounters counters_;
  Subscriptions subscriptions_{*this};  // declared last: gone first, while the table stands
};

}  // namespace q4m
