// QueueTable: one queue table = one append-only data file + its in-memory index.
// Thread-safe. Engine handlers and Consumers share one instance per table,
// obtained from TableRegistry (table_registry.h).
//
// Visibility rules (Q4M semantics):
//  - a row owned by a Consumer is visible only to that Consumer;
//  - a Consumer in owner mode sees only its owned row (and nothing in other tables);
//  - other rows are visible to everybody.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stats.h"
#include "status.h"
#include "key_column.h"
#include "visible_at.h"

namespace q4m {

using RowId = uint64_t;  // > 0, strictly increasing in insert order, stable forever
class Consumer;
class RowFilter;

struct TableCounters {  // per-table, persisted across reopen where noted
  Counter rows_inserted;  // persisted
  Counter rows_removed;   // persisted
  Counter waits, ends, aborts, handoffs, compactions, lease_expiries;
  Counter rows_expired;  // removed by MESSAGE_TTL (set_message_ttl)
  Counter rows_refused;  // not inserted: past MAX_ROWS (set_max_rows)
  Counter rows_deduplicated;  // not inserted: duplicates within the dedup window (set_dedup)
  Counter damaged_reads;  // reads of a row whose bytes on disk failed their checksum (kDamaged)
};

struct TableInfo {
  uint64_t rows = 0;           // live rows (owned included)
  uint64_t owned_rows = 0;
  uint64_t delayed_rows = 0;   // not handed out before a time (queue_abort delay, VISIBLE_AT_COLUMN)
  uint64_t dead_rows = 0;      // back after MAX_DELIVERIES deliveries (set_max_deliveries)
  uint64_t message_groups = 0; // groups with rows in the table (set_message_group)
  uint64_t max_rows = 0;       // the row limit (set_max_rows); 0 = none
  uint64_t dedup_keys = 0;     // keys in the dedup window (set_dedup)
  uint64_t waiters = 0;
  uint64_t file_bytes = 0;
  uint64_t removed_bytes = 0;  // reclaimable by compaction
  uint64_t oldest_row_age_ms = 0;  // 0 when empty (insert time kept in memory / file)
  RowId next_rowid = 1;
  uint64_t dropped_tail_bytes = 0;  // torn tail cut off by crash recovery at open
};

// A row a connection owns (queue_wait, queue_wait_batch): INFORMATION_SCHEMA.QUEUE_OWNED_ROWS.
struct OwnedRowInfo {
  RowId id = 0;
  uint64_t connection_id = 0;  // the owning Consumer's (Consumer(connection_id))
  uint32_t deliveries = 0;     // this delivery included
  uint64_t row_age_ms = 0;     // since its INSERT
  uint64_t owned_ms = 0;       // since it was handed out (a batch: since its first row)
  int64_t lease_left_ms = -1;  // until its lease runs out (0 = due now); -1 = no lease
};

// What a row has been through, which a copy of it keeps (a copying ALTER TABLE
// moves rows into a new table): its insert time, the deliveries that ended without a removal
// (a delivery in progress is not counted, as across a restart) and a pending retry delay.
struct RowHistory {
  uint64_t insert_time_ms = 0;  // wall clock; 0 = inserted now
  uint32_t deliveries = 0;
  uint64_t due_ms = 0;  // wall-clock ms a queue_abort(delay) holds it back until; 0 = none
};

class QueueTable {
 public:
  virtual ~QueueTable() = default;

  // ---- producers -------------------------------------------------------
  // Appends rows; returns once durable per settings().sync() (group commit with
  // every other concurrent insert/remove on this table). Then hands rows to waiters.
  // `ids` (optional) receives the assigned row ids. With a DEDUP_COLUMN (set_dedup), rows
  // whose key was inserted within the window are dropped, not written: *deduplicated
  // (optional) counts them, and `ids` has none for them.
  virtual Status insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids,
                        size_t* deduplicated = nullptr) = 0;

  // Relay dedup (queue_set_srcid): rows[i] is row source_rowids[i] of source_id; the ids
  // strictly increase. Rows whose id is not newer than the last row id recorded for
  // source_id were received before: they are dropped (always a prefix of the list, counted
  // in *dropped). The rest are appended in one chunk together with the new last id, so a
  // crash keeps all of them and the record, or none. Recovery rebuilds the record and
  // compaction keeps it. reset=true (mode 'w') forgets the previous last id first.
  virtual Status insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id,
                                const RowId* source_rowids, bool reset, size_t* dropped) = 0;
  virtual RowId last_relayed_rowid(uint32_t source_id) = 0;  // 0 if none

  // A copy's rows: as insert(), each with what it had been through (history[i] for rows[i]),
  // given in the order they were inserted. Their age, delivery count (so MAX_DELIVERIES finds
  // the dead ones) and retry delays are in the same chunk as the rows.
  virtual Status insert_with_history(const std::vector<std::string_view>& rows,
                                     const std::vector<RowHistory>& history) = 0;

  // ---- SQL scans (handler) ---------------------------------------------
  // Every payload read from disk is checked against its row's checksum first: a row whose
  // bytes fail gives kDamaged (naming the file, the row and its offset) instead of the bytes,
  // and is set aside as a dead row if it was queued or `viewer`/`reader` held it from a wait
  // (docs/recovery.md "Damaged rows"); the other rows read as before.
  // Next row visible to `viewer` (may be null = a connection with no Consumer) with
  // id > after. Returns false at the end. Fills *payload if non-null.
  virtual Status next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload,
                              bool* found) = 0;
  virtual Status read_row(RowId id, std::string* payload, bool* found, const Consumer* reader = nullptr) = 0;
  // Next live row with id > after whoever owns or claims it (copying ALTER TABLE), and
  // (if `history` is not null) what it has been through, for insert_with_history().
  virtual Status next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) = 0;
  virtual uint64_t visible_count(const Consumer* viewer) = 0;  // instant

  // DELETE: claim a visible row for removal (false if it is gone or owned by another
  // consumer), then remove all claimed rows durably in one commit. Claimed rows are
  // invisible to others; if the consumer goes away before remove_claimed they return.
  virtual bool claim_for_delete(Consumer* viewer, RowId id) = 0;
  virtual Status remove_claimed(Consumer* viewer) = 0;

  // ---- maintenance -------------------------------------------------------
  virtual Status truncate() = 0;  // removes every row, owned ones too; waiters keep waiting
  virtual Status compact() = 0;   // rewrites live rows into a new file (ids kept)
  // Rows whose `column` holds a future time are not handed out before it (they are queued,
  // visible and deletable meanwhile): the rows queued now (each read once) and every row
  // inserted from now on. The first call wins; later ones change nothing.
  virtual void set_visible_at(std::shared_ptr<const VisibleAtColumn> column) = 0;
  // The engine's MESSAGE_TTL (0 = none): a queued row (free or delayed, not held by a
  // connection) inserted more than `ttl` ago is removed and never handed out again. A row a
  // connection holds is left to it; if it comes back to the queue after its TTL, it is
  // removed then. Rows already too old when this is called are taken out of reach before it
  // returns. The removal asks for no sync of its own: after a crash that loses it, the row
  // is expired again. The latest call wins (an ALTER TABLE may change the TTL).
  virtual void set_message_ttl(std::chrono::milliseconds ttl) = 0;
  // The engine's MAX_DELIVERIES (0 = no limit): a row handed out `max` times that comes back
  // to the queue (an abort, with or without a delay, a disconnect, an expired lease) is dead:
  // it stays in the table, visible and deletable, but only Consumer::take_dead() hands it
  // out. Its state follows from its delivery count, which the file keeps (RETURN records),
  // so it is dead again after a restart. Queued rows are sorted out again at each call: a
  // higher limit (or 0) brings dead rows below it back to the queue, a lower one kills the
  // queued rows at or above it. The latest call wins.
  virtual void set_max_deliveries(uint32_t max) = 0;
  // The engine's MAX_ROWS (0 = no limit): an insert that would take the table past `max`
  // rows (queued, owned, delayed and dead rows all count) fails with kFull and adds none of
  // its rows; concurrent inserts never overshoot (the group-commit leader counts them). A
  // relayed row dropped as a replay takes no room. Rows already past a lowered limit stay;
  // inserts are refused until consumers take the table below it. The latest call wins.
  virtual void set_max_rows(uint64_t max) = 0;
  // The engine's MESSAGE_GROUP_COLUMN (message_groups.h): rows with the same non-NULL value
  // in `column` are handed out one at a time, in row-id order. The rows in the table now
  // (each read once) and every row inserted from now on. The first call wins.
  virtual void set_message_group(std::shared_ptr<const KeyColumn> column) = 0;
  // The engine's DEDUP_COLUMN and DEDUP_WINDOW (dedup_window.h): an insert (or relayed row)
  // whose non-NULL key equals that of a row inserted less than `window` before is dropped,
  // whatever became of that row since (queued, consumed, deleted, expired). The keys come
  // from the file: the rows inserted within the window, removed ones included, and the
  // DEDUP_KEY records compaction keeps for rows it drops. The first call with a column reads
  // them (one pass over the file); later calls change the window only. A copy's rows
  // (insert_with_history) are never dropped; their keys count from their insert times.
  virtual void set_dedup(std::shared_ptr<const KeyColumn> column, std::chrono::milliseconds window) = 0;

  virtual TableInfo info() = 0;
  // The rows connections own now, in row-id order (rows claimed by a running DELETE are
  // not listed). Not one atomic snapshot: the index is read in slices, the lock released
  // between them, and the walk stops once it has met as many held rows as the table counts.
  virtual std::vector<OwnedRowInfo> owned_rows() = 0;
  virtual TableCounters& counters() = 0;
  virtual const std::string& path() const = 0;
};

}  // namespace q4m
