// WriteBatch: what one caller asks the group commit to write, as typed records (in the
// spirit of LevelDB's WriteBatch): rows to insert, removals, returns. The group-commit
// leader writes the batches of all waiting callers as one chunk (one write, one sync), so a
// batch is atomic: after a crash all of its records are in the file, or none.
//
// The caller fills the inputs; the row policies' admission (core/policy/policy.h) and the
// leader fill the results. Everything the inputs point to is the caller's and outlives
// the commit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/file/format.h"
#include "core/row/ended_row.h"
#include "core/row/history.h"
#include "core/row/holder.h"
#include "core/row/row_id.h"
#include "core/util/status.h"

namespace q4m {

// Whose row a relayed row is: row `id` (> 0; 0: a plain row) of relay source `source`.
// reset (mode 'w'): what the source sent before is forgotten first.
struct RelayTag {
  uint32_t source = 0;
  RowId id = 0;
  bool reset = false;
};

struct WriteBatch {
  // ---- inputs
  // ROW records: new rows, in order; the leader gives them ids.
  const std::vector<std::string_view>* rows = nullptr;
  // A copy's rows (a copying ALTER): what each had been through, one per row. A row whose
  // history has an id keeps it (ids must increase, from the table's next id on); the rest get
  // new ids. The insert time is kept and the rest goes into a RETURN record under the ids.
  const RowHistory* history = nullptr;
  // The id each row asks for (ROW_ID_COLUMN; 0: none), one per row (null: none asks). A row
  // gets it if no id at or above it was given yet (IdSequence), else the next id. With a
  // prepare, a TXN_ASK record keeps them until the end; with an end, the part's.
  const RowId* asked = nullptr;
  // Relayed rows (queue_set_srcid): relay[i] says whose row rows[i] is (null: none is);
  // policy/relay.h drops the ones received before.
  const RelayTag* relay = nullptr;
  // Sources' last ids set without rows (a replica applying the record its primary wrote
  // with relayed rows).
  const fmt::SourceMark* relay_records = nullptr;
  size_t relay_record_count = 0;
  // Rows another server admitted (a replica applying its primary's binary log, which names
  // the duplicates the primary dropped): DEDUP_COLUMN remembers their keys and drops none.
  bool decided = false;
  // The rows were inserted at this time on another server (its binary log's; 0 = now here):
  // MESSAGE_TTL, the dedup window and their age count from it.
  uint64_t insert_time_ms = 0;
  // REMOVE record: rows `remover` holds, removed for good.
  const RowId* removals = nullptr;
  size_t removal_count = 0;
  const Holder* remover = nullptr;
  // The removal is the rows' owner ending its delivery (queue_end): refused if another
  // connection gave the rows back meanwhile (Holder::revoked_by).
  bool owner_end = false;
  // RETURN record: rows that went back to the queue (delivery counts, retry delays).
  const fmt::ReturnedRow* returns = nullptr;
  size_t return_count = 0;
  // Two-phase commit of a transaction's part (core/table/transaction.h):
  //  kPrepare: its rows (TXN_ROW, no ids yet) and removals (TXN_REMOVE) are written with the
  //            prepare (TXN_PREPARE, `xid`); the leader gives it its id (`txn`). Nothing of it
  //            is applied: its rows are not in the table and its removed rows stay claimed.
  //  kEnd:     part `txn` ends (TXN_END): committed, its `end_rows` rows get ids (`ids`,
  //            from first_rowid on, set by the leader) and its removals apply; or rolled back.
  enum class Phase : uint8_t { kNone, kPrepare, kEnd };
  Phase phase = Phase::kNone;
  uint64_t txn = 0;
  std::string_view xid;
  bool commit = false;
  size_t end_rows = 0;
  // kEnd of a part prepared without a write (Table::prepare_unwritten): its removals, written
  // (TXN_REMOVE, TXN_PREPARE with `xid`) before its TXN_END unless already in the file.
  const std::vector<RowId>* part_removals = nullptr;
  RowId first_rowid = 0;
  // ID_FLOOR record: rows that ask for no id get ids from here on (CREATE/ALTER TABLE ...
  // AUTO_INCREMENT=N); 0, or not above the table's floor: none.
  RowId id_floor = 0;
  // Subscriptions (core/table/subscriptions.h): a SUBSCRIBE record (start 0: the leader
  // gives it the next row id, in subscribed_start), an UNSUBSCRIBE record (its number, 0:
  // none), a SUB_REMOVE record (subscription `sub` ended these rows). Before its REMOVE.
  struct Subscribe {
    uint32_t number = 0;
    RowId start = 0;
    std::string_view name, condition;
  };
  const Subscribe* subscribe = nullptr;
  uint32_t unsubscribe = 0;
  uint32_t sub = 0;
  const RowId* sub_removals = nullptr;
  size_t sub_removal_count = 0;
  // false: the caller does not wait for a sync (a removal with queue_sync_removals=OFF, a
  // RETURN record). The chunk is synced if any batch in it asks for it.
  bool sync = true;
  // A prepare that the binary log redoes after a power cut (core/table/redo.h): written
  // without a sync of its own, its records are copied into `redo` for the binary log.
  bool redo_requested = false;

  // ---- results
  // The rows admitted, as indices into *rows (admission starts with all of them).
  std::vector<size_t> admitted;
  std::vector<size_t> replays;  // relayed rows received before (dropped: policy/relay.h), increasing
  std::vector<fmt::SourceMark> relay_marks;  // the sources' last ids it sets (records included)
  size_t deduplicated = 0;  // duplicates within the dedup window (dropped: policy/dedup.h)
  std::vector<RowId> ids;   // of the admitted rows, in order (an end: of its part's rows)
  std::vector<uint64_t> offsets;  // of their payloads inside the written chunk bytes
  uint64_t txn_end_end = 0;  // an end: where its TXN_END ends inside the written chunk bytes
  // The histories of copied rows that the chunk keeps, under their ids.
  std::vector<fmt::ReturnedRow> histories_kept;
  // A prepare's TXN_ASK: the id each admitted row asks for (empty: none asks).
  std::vector<RowId> asked_kept;
  // HISTORY_RETENTION: how the rows it removes ended (a HISTORY record before its REMOVE or
  // committed TXN_END; core/table/history.cc).
  std::vector<fmt::HistoryEntry> ended;
  RowId subscribed_start = 0;  // the SUBSCRIBE's start as written
  // With redo_requested: the part's redo (encode_redo(): the file, the part, its records).
  // Empty if its records could not be copied (split across chunks): then it was synced.
  std::string redo;
  Status status;

  bool inserts() const { return rows != nullptr && phase != Phase::kEnd; }
  // Row i's insert time: a copy's own (RowHistory), else insert_time_ms, else now.
  uint64_t inserted_at(size_t i, uint64_t now) const {
    if (history && history[i].insert_time_ms) return history[i].insert_time_ms;
    return insert_time_ms ? insert_time_ms : now;
  }
  // The rows admission dropped (indices into *rows, increasing).
  std::vector<size_t> dropped_rows() const {
    std::vector<size_t> out;
    if (!inserts()) return out;
    size_t k = 0;
    for (size_t i = 0; i < rows->size(); i++) {
      if (k < admitted.size() && admitted[k] == i)
        k++;
      else
        out.push_back(i);
    }
    return out;
  }
};

}  // namespace q4m
