// Recovery: rebuilds a table's state by walking the chunks of its data file.
//  - a bad chunk with no valid durable chunk anywhere after it is a torn write (or, in
//    sync mode none, a power cut that lost part of the unsynced tail): the file is cut
//    back to the last good chunk (reported in dropped_tail_bytes, not an error);
//  - a bad chunk followed by a valid chunk written in a durable sync mode is corruption:
//    kCorrupt "file <path>: corrupt chunk at offset N: <why>" and nothing is changed.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include <string_view>
#include <unordered_map>

#include "core/file/data_file.h"
#include "core/file/format.h"
#include "core/file/row_check.h"
#include "core/row/ended_row.h"
#include "core/row/index.h"

namespace q4m {

using SourceMap = std::unordered_map<uint32_t, RowId>;  // relay source -> last row id

// A transaction's part written by a prepare and not ended yet (two-phase commit): its rows
// (id 0 until it commits), its removals and its xid.
struct PreparedPart {
  std::string xid;
  std::vector<RowEntry> rows;
  std::vector<RowId> removals;
  std::vector<fmt::SourceMark> relay;  // the relay sources' last ids it sets (TXN_SRCID)
  std::vector<RowId> asked;  // the id each row asks for (TXN_ASK; empty: none asks)
  bool prepared = false;  // its TXN_PREPARE was read
  // Subscription `sub`'s ends it makes if it commits (TXN_SUB_REMOVE; empty: none).
  uint32_t sub = 0;
  std::vector<RowId> sub_removals;
};

// A subscription the file holds (SUBSCRIBE, not UNSUBSCRIBEd): the rows it ended (SUB_REMOVE),
// those still live once recovery is done.
struct RecoveredSubscription {
  std::string name;
  std::string condition;
  RowId start = 0;
  std::vector<RowId> ended;
};

struct RecoveredTable {
  RowIndex index;
  RowId next_rowid = 1;
  RowId id_floor = 0;  // ID_FLOOR: the least id a row that asks for none gets
  SourceMap sources;
  uint64_t rows_inserted = 0;
  uint64_t rows_removed = 0;
  uint64_t dropped_tail_bytes = 0;  // torn tail cut off by this recovery
  uint64_t chunks = 0;
  // Live rows given back with a retry delay (RETURN records): wall-clock ms when each may be
  // handed out again. Entries may lie in the past; rows removed later have none.
  std::unordered_map<RowId, uint64_t> due_ms;
  // Prepared parts not ended in the file, by transaction id; the next unused id.
  std::map<uint64_t, PreparedPart> prepared;
  uint64_t next_txn = 1;
  // Rows of format 1 to 4 and rows committed by a TXN_END (no checksum covering their id on
  // disk): the checksum of their bytes as read now, with their chunk's checksum passed, so
  // later reads of them are checked too.
  KnownChecksums known_sums;
  // History rows (HISTORY_RETENTION), in the order they ended in the file: a HISTORY record's
  // rows (still live when it is read, the REMOVE after it ends them) and HISTORY_ROWs.
  // Whatever their age: the table drops those past its retention once configured.
  std::vector<EndedRow> ended;
  // Subscriptions by number (core/table/subscriptions.h); the next unused number.
  std::map<uint32_t, RecoveredSubscription> subscriptions;
  uint32_t next_subscription = 1;
};

// A RETURN record's entry (or the index snapshot's equivalent) applied to the rows read so
// far: the entry with the most deliveries wins, so out-of-order records do no harm.
void apply_returned_row(const fmt::ReturnedRow& r, RecoveredTable* t);

Status recover_table(DataFile& file, RecoveredTable* out);

// Every record of the file's chunks up to `size`, in file order, with the chunk body it is
// in (for the dedup window's keys: rows and DEDUP_KEY records). The file was recovered or
// checked when it was opened; a bad chunk ends the walk with kCorrupt.
Status for_each_record(const DataFile& file, uint64_t size,
                       const std::function<void(const fmt::Record& r, std::string_view body)>& fn);

}  // namespace q4m
