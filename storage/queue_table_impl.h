// QueueTableImpl: the one implementation of QueueTable (internal header).
//
// Three pieces of shared state, each behind its own lock, always taken in this order:
//   commit_  (short)  the group-commit queue: pending requests + "a leader is busy" flag
//                     (callers wait on their request's futex word, outside any lock)
//   writer_  (long)   what only the current writer touches: next row id, relay sources,
//                     the file being appended to; held by the leader for write+sync
//   state_   (short)  the row index, waiters, scan cursors, delete claims, readers' file
//                     and its tail cache
//   then a Consumer's own mutex (hand-off), never the other way round.
// Files: queue_table_impl.cc (reads, visibility), group_commit.cc (insert/remove path),
// table_handoff.cc (ownership, waiters), table_maintenance.cc (compact/truncate/drop/rename).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "consumer.h"
#include "data_file.h"
#include "dedup_window.h"
#include "guarded.h"
#include "lease.h"
#include "message_groups.h"
#include "queue_table.h"
#include "recovery.h"
#include "row_check.h"
#include "row_filter.h"
#include "row_index.h"
#include "scan_cursors.h"
#include "read_ahead_window.h"
#include "tail_cache.h"

namespace q4m {

struct Waiter {
  Consumer::Impl* consumer;
  int sub_index;
  std::shared_ptr<const RowFilter> filter;  // null = any row
};

// A row to read outside the table's lock: `file` keeps the right file alive even if
// compaction swaps it meanwhile; `block`, if set, is read instead and kept as read-ahead.
struct UncachedRead {
  std::shared_ptr<DataFile> file;
  RowLocation row;
  std::optional<ReadAheadWindow::Plan> block;
};

struct TableState {
  RowIndex index;
  std::shared_ptr<DataFile> file;  // what readers pread from (swapped by compaction)
  TailCache tail;                  // the newest bytes of `file`, filled by publish()
  ReadAheadWindow window;          // older bytes of `file`, read ahead for a deep backlog
  std::list<Waiter> waiters;       // FIFO
  RowId first_free_hint = 0;       // cursor of the "any row" filter
  uint64_t free_epoch = 0;         // counts rows returning to Free (see take_or_register)
  ScanCursors cursors;             // of filtered waits
  std::unordered_map<const Consumer*, std::vector<RowId>> claims;
  LeaseHeap leases;  // deadlines of leased owned rows (table_handoff.cc)
  // Delayed rows (kDelayed): when each returns to the queue. A deadline is live while
  // delay_tokens maps its row to its token; its pop, or the row's removal, erases the entry.
  // due_ms (wall clock) is what a RETURN record, compaction or the index snapshot keeps.
  struct DelayToken {
    uint64_t token = 0;
    uint64_t due_ms = 0;
    // A retry's delay (queue_abort(seconds)), which the file keeps; not one the row's
    // VISIBLE_AT_COLUMN value sets: the column gives that again at open (set_visible_at) and
    // in a copy's new table, and one dropped from the table by ALTER no longer holds the row.
    bool retry = true;
  };
  LeaseHeap delays;
  std::unordered_map<RowId, DelayToken> delay_tokens;
  std::shared_ptr<const VisibleAtColumn> visible_at;  // set_visible_at(): new rows may start delayed
  std::shared_ptr<const KeyColumn> message_group;  // set_message_group()
  MessageGroups groups;  // of the grouped rows (RowEntry::grouped), when message_group is set
  uint64_t ttl_ms = 0;       // set_message_ttl(); 0 = rows never expire
  uint32_t max_deliveries = 0;  // set_max_deliveries(); 0 = no limit
  std::set<RowId> dead_ids;     // the kDead rows, oldest first (set_state keeps it): DEAD_ROWS, queue_take_dead()
  // A row back from its max_deliveries-th delivery is dead, not queued again.
  bool dies(const RowEntry& e) const { return max_deliveries != 0 && e.deliveries >= max_deliveries; }
  // May `e` be handed out now: free, and if grouped, its group's ready row.
  bool takeable(const RowEntry& e) const {
    return e.state == RowState::kFree && (!e.grouped || groups.is_ready(e.id));
  }
  // Does `e` hold up the rest of its message group? Not once dead, nor while queue_take_dead()
  // lends it out (delivered past the limit).
  bool in_line(const RowEntry& e) const {
    return e.state != RowState::kDead &&
           !(e.state == RowState::kOwned && max_deliveries != 0 && e.deliveries > max_deliveries);
  }
  bool ttl_watched = false;  // the reaper knows when the oldest queued row expires (expiry.cc)
  bool delay_is_live(const LeaseDeadline& d) const {
    auto it = delay_tokens.find(d.id);
    return it != delay_tokens.end() && it->second.token == d.token;
  }
  // What the file keeps of live row `e` across a restart (RETURN record, compaction, index
  // snapshot): the deliveries that ended without a removal, and a pending delay. A delivery
  // still in progress is not counted: after a crash the row comes back without it having
  // ended. False if there is nothing to keep.
  bool kept_across_restart(const RowEntry& e, fmt::ReturnedRow* out) const {
    out->id = e.id;
    out->deliveries = e.deliveries - (e.state == RowState::kOwned && e.deliveries > 0 ? 1 : 0);
    out->due_ms = 0;
    if (e.state == RowState::kDelayed || e.state == RowState::kClaimedForDelete) {
      auto it = delay_tokens.find(e.id);
      if (it != delay_tokens.end() && it->second.retry) out->due_ms = it->second.due_ms;
    }
    return out->deliveries > 0 || out->due_ms > 0;
  }
  void clear_delays() {
    delays.clear();
    delay_tokens.clear();
  }
  bool dropped = false;

  // Readers now pread `f` (compaction, TRUNCATE, RENAME, open); the tail cache restarts
  // at its end, so rows below it may be read ahead at once.
  void install_file(std::shared_ptr<DataFile> f) {
    tail.reset(f->id(), f->size());
    file = std::move(f);
  }

  // Rows of format 1 to 4 in `file` (no checksum on disk): what their bytes must match.
  LegacyChecksums legacy;
  RowLocation locate(const RowEntry& e) const {
    RowLocation r{e.id, e.offset, e.length};
    if (const uint32_t* sum = legacy.empty() ? nullptr : legacy.find(e.id)) {
      r.stored = false;
      r.known = *sum;
    }
    return r;
  }
  // A row's payload from the tail cache (the bytes this process wrote) or the read-ahead
  // window (bytes read from disk, so checked here); false if it is in neither (then
  // uncached_read(), and QueueTableImpl::read_uncached outside the lock). If true, *status
  // says whether the bytes passed their check (kDamaged: *out holds nothing usable).
  bool read_cached(const RowLocation& r, std::string* out, Status* status) const;
  // read_cached(), else a pread under the lock (for the few reads that cannot drop it).
  Status read_here(const RowLocation& r, std::string* out) const;
  // Under the state lock, when a statement first opens the table (set_visible_at,
  // set_message_group): fn(e, payload) for each row that want(e) selects, reading the file
  // front to back in 4 MiB blocks. Rows whose bytes cannot be read are skipped: the
  // consumer's own read reports them; those that fail their checksum go to *damaged.
  void for_each_payload(const std::function<bool(const RowEntry&)>& want,
                        const std::function<void(RowEntry&, std::string_view)>& fn, std::vector<RowId>* damaged);
  // What to pread for a row the caches do not hold. Read ahead only below the tail
  // cache's start: those bytes are published and never change.
  UncachedRead uncached_read(const RowLocation& row) const {
    UncachedRead r{file, row, std::nullopt};
    ReadAheadWindow::Plan plan;
    if (file && tail.file_id() == file->id() &&
        ReadAheadWindow::plan(row.offset, row.disk_length(), tail.begin(), &plan))
      r.block = plan;
    return r;
  }
};

struct WriterState {
  std::shared_ptr<DataFile> file;  // appended to by the leader
  RowId next_rowid = 1;
  SourceMap sources;
  std::string buffer;  // reused chunk buffer
  Status broken;       // sticky: after a failed sync the file's content is unknown
  uint64_t generation = 0;  // bumped when the file is replaced other than by compaction
  bool snapshot_written = false;  // close() left an index snapshot: remove before changing the file
  // DEDUP_COLUMN (set_dedup): the column and the keys inserted within the window.
  std::shared_ptr<const KeyColumn> dedup_column;
  DedupWindow dedup;
};

struct CommitRequest {
  enum Kind { kInsert, kRelayed, kRemove, kReturn } kind = kInsert;
  const std::vector<std::string_view>* rows = nullptr;  // kInsert, kRelayed
  const RowHistory* history = nullptr;  // kInsert of a copy: one per row (insert_with_history)
  std::vector<fmt::ReturnedRow> histories_kept;  // the leader's: their RETURN entries under the new ids
  const RowId* source_rowids = nullptr;                 // kRelayed: one per row, increasing
  uint32_t source_id = 0;
  bool reset = false;
  const RowId* remove_ids = nullptr;  // kRemove: rows held by `remover` (caller's storage)
  size_t remove_count = 0;
  const Consumer* remover = nullptr;
  const fmt::ReturnedRow* returns = nullptr;  // kReturn (caller's storage), never synced
  size_t return_count = 0;
  // false: a removal whose caller waived its sync (queue_sync_removals=OFF). The batch is
  // synced if any of its requests asks for it.
  bool sync = true;
  // results, written by the leader
  std::vector<RowId> ids;
  std::vector<uint64_t> offsets;  // payload offsets inside the chunk buffer
  std::vector<size_t> written;    // for each of ids: its row's index in *rows
  size_t dropped = 0;             // kRelayed: leading rows already received (not in ids)
  size_t deduplicated = 0;        // rows dropped as duplicates within the dedup window (not in ids)
  Status status;
  // How the caller learns what to do, without touching the commit_ lock once woken:
  // kQueued -> kTryLead (the turn is free: lead the next batch if still pending) or
  // kDone (a leader wrote this request; results are set). The caller sleeps on it (futex).
  enum Signal : uint32_t { kQueued, kTryLead, kDone };
  std::atomic<uint32_t> signal{kQueued};
  bool taken = false;  // guarded by commit_: in a leader's batch (no longer pending)
};

struct CommitQueue {
  std::vector<CommitRequest*> pending;
  std::vector<CommitRequest*> spare;  // the previous batch's vector, reused (no allocation per commit)
  bool busy = false;      // a leader (or maintenance) owns the writer turn
  int turn_waiters = 0;   // maintenance waiting in WriterTurn (on commit_cv_)
};

class QueueTableImpl : public QueueTable, public LeasedTable, public std::enable_shared_from_this<QueueTableImpl> {
 public:
  // Opens an existing data file with recovery.
  static Status open(const std::string& path, std::shared_ptr<QueueTableImpl>* out);
  ~QueueTableImpl() override;

  // QueueTable
  Status insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids,
                size_t* deduplicated = nullptr) override;
  Status insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id, const RowId* source_rowids,
                        bool reset, size_t* dropped) override;
  RowId last_relayed_rowid(uint32_t source_id) override;
  Status next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload, bool* found) override;
  Status read_row(RowId id, std::string* payload, bool* found, const Consumer* reader = nullptr) override;
  Status insert_with_history(const std::vector<std::string_view>& rows,
                             const std::vector<RowHistory>& history) override;
  Status next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) override;
  uint64_t visible_count(const Consumer* viewer) override;
  bool claim_for_delete(Consumer* viewer, RowId id) override;
  Status remove_claimed(Consumer* viewer) override;
  // remove_claimed(), also saying how many rows it removed.
  Status remove_claimed_rows(Consumer* viewer, size_t* removed);
  Status truncate() override;
  Status compact() override;
  void set_visible_at(std::shared_ptr<const VisibleAtColumn> column) override;
  void set_message_ttl(std::chrono::milliseconds ttl) override;
  void set_max_deliveries(uint32_t max) override;
  void set_max_rows(uint64_t max) override { max_rows_.store(max, std::memory_order_relaxed); }
  void set_message_group(std::shared_ptr<const KeyColumn> column) override;
  void set_dedup(std::shared_ptr<const KeyColumn> column, std::chrono::milliseconds window) override;
  TableInfo info() override;
  std::vector<OwnedRowInfo> owned_rows() override;
  TableCounters& counters() override { return counters_; }
  const std::string& path() const override { return *path_.load(std::memory_order_acquire); }

  // ---- used by Consumer (table_handoff.cc) ----
  enum class Take { kTaken, kRegistered, kNone, kConsumerDone, kDropped };
  // Gives the first Free row matching `filter` to `c` (if c is still waiting), else
  // registers `c` as a waiter when `register_waiter`.
  // The oldest dead row (dead_letters.cc): kTaken, kNone or kDropped; never registers.
  Take take_dead(Consumer::Impl& c);
  // What a take (or a write) on a dropped table answers (table_maintenance.cc).
  Status dropped_status() const;
  Take take_or_register(Consumer::Impl& c, int sub_index, const std::shared_ptr<const RowFilter>& filter,
                        bool register_waiter);
  void unregister(Consumer::Impl& c);
  // Removal of c's owned rows `ids` in one commit (synced unless c waived it); Ok for rows
  // that vanished.
  Status end_rows(const Consumer* c, const RowId* ids, size_t count);
  // Back to Free (+ hand to a waiter); with a delay > 0, kDelayed until then. False if c
  // no longer held it; else *returned says what record_returns() should keep of it.
  bool abort_row(const Consumer* c, RowId id, std::chrono::milliseconds delay, fmt::ReturnedRow* returned);
  // Appends a RETURN record for rows that went back to the queue, without a sync of its
  // own: delivery counts and retry delays survive a server crash and a restart, and a power
  // cut survives them once any later sync ran (docs/file-format.md, "RETURN").
  void record_returns(const std::vector<fmt::ReturnedRow>& rows);
  void release_claims(const Consumer* c);         // claimed rows back to Free
  // Before end_rows of leased rows (c's `count` owned rows, the lowest `first`):
  // kLeaseExpired if the lease already ran out, else the lease is cancelled, so the rows
  // can no longer go back to the queue under the removal.
  Status settle_lease(const Consumer::Impl& c, RowId first, size_t count);
  // The owned rows `ids` of c are now leased until `lease` from now (a new lease, whether or
  // not they had one); kLeaseExpired if their lease already ran out.
  Status renew_lease(const Consumer::Impl& c, const RowId* ids, size_t count, std::chrono::milliseconds lease);

  // LeasedTable (the reaper's thread)
  LeaseClock::time_point expire_leases(LeaseClock::time_point now) override;
  // Under the state lock: returns rows whose lease ran out, frees rows whose delay is over;
  // the next deadline. *returned: the rows that went back, for record_returns().
  LeaseClock::time_point expire_due(LeaseClock::time_point now, std::vector<fmt::ReturnedRow>* returned);

  // expiry.cc (MESSAGE_TTL). Rows past their TTL are claimed for removal by expirer_, as a
  // DELETE claims rows, under the state lock; remove_expired() then commits their removal.
  // If `e` (queued or coming back to the queue) is past its TTL: claimed, true.
  bool claim_if_expired(TableState& st, RowEntry& e, uint64_t wall_ms);
  // Claims every queued row past its TTL, oldest first (at most kMaxExpiredPerPass); returns
  // when the next one expires (time_point::max() if no row is queued).
  LeaseClock::time_point claim_expired(TableState& st, LeaseClock::time_point now);
  void remove_expired();  // outside the state lock
  static constexpr size_t kMaxExpiredPerPass = 100000;

  // ---- used by TableRegistry ----
  void mark_dropped();  // waiters get kDropped, rows vanish, file closed
  Status rename_to(const std::string& to);
  void close();  // clean close (flushes nothing: every commit is already durable)

 private:
  QueueTableImpl(const std::string& path, std::shared_ptr<DataFile> file, RecoveredTable&& rec);
  // At open: rows whose retry delay (queue_abort) was still ahead when the server stopped
  // wait for it again.
  void restore_delays(const std::unordered_map<RowId, uint64_t>& due_ms);

  // Under the state lock: `e`'s payload if a cache holds it (then the status of the read),
  // else nullopt and *r says what read_uncached() is to read outside the lock. `reader`
  // (may be null) is who reads: see set_aside_damaged().
  std::optional<Status> read_locked(TableState& st, const RowEntry& e, const Consumer* reader, std::string* payload,
                                    UncachedRead* r);
  // A row the caches did not hold (TableState::uncached_read), read outside the state
  // lock and checked; a read-ahead block goes into the window.
  Status read_uncached(const UncachedRead& r, std::string* payload, const Consumer* reader);
  // damaged_reads.cc. A read of row `id` from disk failed its checksum: counted, and the
  // row is set aside as a dead row (takes skip it; scans still meet it, and fail on it) if
  // it is queued, or if `reader` holds it from a wait (not queue_take_dead(), whose taker
  // decides): `reader`'s end() then removes none of its rows. A row another connection holds
  // stays with it: its holder's own read reports the damage.
  void set_aside_damaged(TableState& st, RowId id, const Consumer* reader);

  // group_commit.cc
  Status check_row_lengths(const std::vector<std::string_view>& rows) const;  // each fits a chunk
  void commit(CommitRequest* req);
  void lead(CommitRequest* req, std::vector<CommitRequest*>& batch);
  // Writes (and syncs) the batch. Requests it answers early leave the batch as nullptr.
  void run_batch(const CommitRequest* leader, std::vector<CommitRequest*>& batch);
  // DEDUP_COLUMN, for the leader (table_dedup.cc): appends to *rows the indices of r's rows
  // from `first` on that are not duplicates (their keys go into the window, with `undo` to
  // take them back); returns how many were.
  size_t unique_rows(WriterState& w, const CommitRequest& r, size_t first, uint64_t now_ms, std::vector<size_t>* rows,
                     std::vector<std::pair<std::string, uint64_t>>* undo);
  // Requests that waived the sync (removals with queue_sync_removals=OFF, returns), in a
  // batch that syncs for others: published and answered once written, before the sync;
  // they leave the batch (nullptr).
  void answer_unsynced(const CommitRequest* leader, std::vector<CommitRequest*>& batch);
  // Drops r's removed rows from the index; returns how many.
  uint64_t publish_removal(TableState& st, const CommitRequest& r);
  // After publishing rows into or out of the index (state_ held): the lock-free mirrors of
  // its size and the inserted/removed counters.
  void note_index_change(const TableState& st, uint64_t inserted, uint64_t removed);
  // `written` (the batch's chunk bytes, now at `base` of `file`) also goes to the tail cache.
  void publish(const std::vector<CommitRequest*>& batch, const DataFile& file, uint64_t base,
               std::string_view written, uint64_t now_ms);
  void maybe_auto_compact();
  CommitRequest* pass_writer_turn(CommitQueue& q);  // commit_ held; returns whom to wake

  // Exclusive use of the writer for maintenance: waits for the current leader, then
  // keeps new commits queued until destroyed (a queued follower then leads).
  class WriterTurn {
   public:
    explicit WriterTurn(QueueTableImpl& t);
    ~WriterTurn();
    WriterTurn(const WriterTurn&) = delete;
    WriterTurn& operator=(const WriterTurn&) = delete;

   private:
    QueueTableImpl& t_;
  };

  // table_handoff.cc (state_ held)
  // Every change of a live row's state goes through count_state_change(), which keeps the
  // owned_ and delayed_ mirrors in step (a removal from the index counts as `to` kRemoved);
  // set_state() also makes the change, and keeps dead_ids and the row's message group.
  void count_state_change(RowState from, RowState to);
  void set_state(TableState& st, RowEntry& e, RowState to) {
    count_state_change(e.state, to);
    if (e.state == RowState::kDead) st.dead_ids.erase(e.id);
    if (to == RowState::kDead) st.dead_ids.insert(e.id);
    e.state = to;
    if (e.grouped) st.groups.refresh(e.id, group_lookup(st));
  }
  // table_groups.cc: how MessageGroups sees the rows of `st`.
  static MessageGroups::RowLookup group_lookup(TableState& st);
  // Offers the rows whose message group let them go since the last call (a row ahead of
  // them ended, died or was removed; or they came back to the queue) to the waiters, and
  // moves scan cursors back to them.
  void release_ready(TableState& st);
  void offer_row(TableState& st, RowEntry& e, std::string_view payload_if_known);
  void row_became_free(TableState& st, RowEntry& e);
  // kDelayed until `delay` from now; returns that time (wall-clock ms, as kept in delay_tokens).
  enum class DelayKind { kRetry, kVisibleAt };
  uint64_t delay_row(TableState& st, RowEntry& e, std::chrono::milliseconds delay, DelayKind kind);
  // A Free row (new, or queued when set_visible_at() came): delayed if its column says so,
  // else offered to the waiters. `now` is the wall clock in ms.
  void queue_row(TableState& st, RowEntry& e, std::string_view payload, int64_t now);
  // A new row copied with its history (insert_with_history): takes its delivery count; true
  // if that makes it dead (MAX_DELIVERIES) or its retry delay is still ahead (then kDelayed),
  // false if it goes to the queue as any new row (queue_row).
  bool queue_copied_row(TableState& st, RowEntry& e, const RowHistory& history, uint64_t now_ms);
  void watch_deadline(LeaseClock::time_point at);  // the reaper calls expire_leases() by then
  // `e` is held by `claimer` for removal (a DELETE, or expiry): hidden from takes and scans
  // until remove_claimed_rows(claimer) removes it or unclaim() gives it back.
  void claim_row(TableState& st, RowEntry& e, const Consumer* claimer);
  // A claim that was not carried out: the row returns to Free, or to kDelayed if its delay
  // is still pending.
  void unclaim(TableState& st, RowEntry& e);
  RowId* cursor_for(TableState& st, const std::shared_ptr<const RowFilter>& filter);
  Take take_locked(TableState& st, Consumer::Impl& c, int sub_index, RowEntry& e);
  // `e` now belongs to `c`, which accepted it as delivery number `deliveries`: owner,
  // delivery count, and a lease if c asked for one.
  void give_row(TableState& st, const Consumer::Impl& c, RowEntry& e, uint32_t deliveries);
  void lease_row(TableState& st, const Consumer::Impl& c, RowId id, int64_t ms);  // new token + deadline
  // One more row under c's live lease (a batch): the same token and deadline.
  void add_to_lease(TableState& st, const Consumer::Impl& c, RowId id);
  Take register_locked(TableState& st, Consumer::Impl& c, int sub_index,
                       const std::shared_ptr<const RowFilter>& filter);

  // table_maintenance.cc (state_ held): every row vanishes (TRUNCATE, DROP), owned ones
  // too; the lock-free mirrors of the index drop to zero with them.
  void forget_rows(TableState& st);

  // compaction.cc
  Status compact_now();
  // table_maintenance.cc
  Status invalidate_snapshot(WriterState& w);

  void set_path(const std::string& p);

  Guarded<CommitQueue> commit_;
  std::condition_variable commit_cv_;  // maintenance waiting for the writer turn only
  Guarded<WriterState> writer_;
  Guarded<TableState> state_;

  Guarded<std::deque<std::string>> paths_;  // every name this table had; path_ points into it
  std::atomic<const std::string*> path_{nullptr};

  // lock-free mirrors for instant info()/visible_count()
  std::atomic<uint64_t> rows_{0}, owned_{0}, waiters_{0}, file_bytes_{0}, live_bytes_{0};
  std::atomic<uint64_t> max_rows_{0};  // set_max_rows(); 0 = no limit
  std::atomic<bool> dedup_on_{false};  // set_dedup() named a column (the writer state has it)
  std::atomic<uint64_t> dedup_window_ms_{0}, dedup_keys_{0};  // set_dedup(); keys in the window
  std::atomic<uint64_t> delayed_{0};  // rows in kDelayed
  std::atomic<RowId> next_rowid_{1};
  std::atomic<bool> dropped_{false};
  std::atomic<bool> lease_watched_{false};  // handed to the LeaseReaper (once)
  std::mutex compaction_mu_;  // one compaction at a time (serializes the operation only)
  uint64_t dropped_tail_bytes_ = 0;
  TableCounters counters_;
  // Who claims rows past their MESSAGE_TTL; its removals ask for no sync.
  const std::unique_ptr<Consumer> expirer_;
};

uint64_t now_ms();  // wall clock, for insert times

// The QueueTableImpl behind a QueueTable (all tables are ours).
inline QueueTableImpl* impl_of(QueueTable* t) { return static_cast<QueueTableImpl*>(t); }

}  // namespace q4m
