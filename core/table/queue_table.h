// QueueTable: one queue table = one append-only data file + its in-memory index. What the
// engine, the SQL functions and Consumer see of a table; thread-safe. One instance per
// table, shared through TableRegistry (registry.h). The one implementation is Table
// (table.h).
//
// Visibility rules (Q4M semantics):
//  - a row a connection holds (owns, or claimed for a DELETE) is visible only to it;
//  - a connection in owner mode sees only its owned row(s), and nothing in other tables;
//  - other rows are visible to everybody.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/policy/options.h"
#include "core/policy/table_stats.h"
#include "core/row/filter.h"
#include "core/row/history.h"
#include "core/row/holder.h"
#include "core/row/row_id.h"
#include "core/util/status.h"

namespace q4m {

class Consumer;
class QueueTable;

// A row a connection owns (queue_wait, queue_wait_batch): INFORMATION_SCHEMA.QUEUE_OWNED_ROWS.
struct OwnedRowInfo {
  RowId id = 0;
  uint64_t connection_id = 0;  // its holder's
  uint32_t deliveries = 0;     // this delivery included
  uint64_t row_age_ms = 0;     // since its INSERT
  uint64_t owned_ms = 0;       // since it was handed out (a batch: since its first row)
  int64_t lease_left_ms = -1;  // until its lease runs out (0 = due now); -1 = no lease
};

// What a connection's scan may see (the visibility rules above), as its Consumer says.
struct View {
  const Holder* holder = nullptr;
  const QueueTable* owned_in = nullptr;        // owner mode: the table it owns rows in
  RowId owned = 0;                             // its row there (the lowest of a batch)
  const std::vector<RowId>* batch = nullptr;   // a batch's rows, ascending; null for one row
};

// Where a taken row goes: the consumer's side of a hand-off (consumer.cc). Called by a
// table under its state lock.
class Receiver {
 public:
  virtual ~Receiver() = default;
  // Whether the receiver takes row `id` as delivery number `deliveries` for its
  // subscription `sub` (false: it stopped waiting, or has its row already).
  virtual bool accept(int sub, RowId id, uint32_t deliveries) = 0;
  // Whether it still waits for a row (else a table does not register it as a waiter).
  virtual bool waiting() = 0;
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
};

class QueueTable {
 public:
  virtual ~QueueTable() = default;

  // ---- producers -------------------------------------------------------
  // Appends rows; returns once durable per settings().sync() (group commit with every other
  // concurrent insert/remove on this table), then hands rows to waiters. `ids` (optional)
  // receives the assigned row ids. With a DEDUP_COLUMN, rows whose key was inserted within
  // the window are not written: *deduplicated (optional) counts them, and `ids` has none.
  virtual Status insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids,
                        size_t* deduplicated = nullptr) = 0;
  // Relay dedup (queue_set_srcid): rows[i] is row source_rowids[i] of source_id; the ids
  // strictly increase. Rows whose id is not newer than the last one recorded for source_id
  // were received before: they are dropped (always a prefix, counted in *replayed). The rest
  // are appended in one chunk with the new last id. reset=true (mode 'w') forgets the
  // previous last id first.
  virtual Status insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id,
                                const RowId* source_rowids, bool reset, size_t* replayed) = 0;
  virtual RowId last_relayed_rowid(uint32_t source_id) = 0;  // 0 if none
  // A copy's rows: as insert(), each with what it had been through (history[i] for rows[i]),
  // given in the order they were inserted.
  virtual Status insert_with_history(const std::vector<std::string_view>& rows,
                                     const std::vector<RowHistory>& history) = 0;

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

  // DELETE: claim a visible row for removal (false if it is gone or held by another
  // connection), then remove all claimed rows durably in one commit. Claimed rows are
  // invisible to others; if the consumer goes away before remove_claimed they return.
  virtual bool claim_for_delete(Consumer* viewer, RowId id) = 0;
  virtual Status remove_claimed(Consumer* viewer) = 0;

  // ---- maintenance -------------------------------------------------------
  virtual Status truncate() = 0;  // removes every row, owned ones too; waiters keep waiting
  virtual Status compact() = 0;   // rewrites live rows into a new file (ids kept)
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
  // The rows connections own now, in row-id order (rows claimed by a running DELETE are not
  // listed). Not one atomic snapshot: the index is read in slices.
  virtual std::vector<OwnedRowInfo> owned_rows() = 0;
  virtual TableCounters& counters() = 0;
  virtual const std::string& path() const = 0;

  // ---- Consumer (consumer.cc) -------------------------------------------
  enum class Take { kTaken, kRegistered, kNone, kConsumerDone, kDropped };
  // Gives the first takeable row matching r.filter to r.receiver (if it still accepts one),
  // else registers it as a waiter when `register_waiter`, to be handed the next such row.
  virtual Take take(const TakeRequest& r, bool register_waiter) = 0;
  virtual Take take_dead(const TakeRequest& r) = 0;  // the oldest dead row (MAX_DELIVERIES)
  virtual void unregister(const Receiver* r) = 0;
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
  virtual void release_claims(const Holder* h) = 0;  // a DELETE's claimed rows back to the queue
  virtual Status dropped_status() const = 0;          // what a take or write on a dropped table answers
};

// What an owner whose rows another connection gave back (Holder::revoked_by) is told at its
// next queue_end() or queue_wait(): its `count` rows from `first` were not removed.
Status revoked_status(const Holder& h, RowId first, size_t count);

}  // namespace q4m
