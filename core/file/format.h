// On-disk layout of a queue data file (see docs/file-format.md). Pure encoding and
// decoding; no I/O. All integers are little-endian.
//
//   file   := file_header chunk*
//   header := "Q4MQUEUE" u32 version u32 crc32c(magic+version)
//   chunk  := u32 magic "Q4MC" | u32 flags_and_len | u32 crc32c(body) | u32 crc32c(previous 12 bytes)
//             body (records; a record never spans chunks)
//             flags_and_len: body length (bits 0..30) | kChunkUnsynced (bit 31, version 2)
//   record := ROW    u8 7 | u64 rowid | u64 insert_time_ms | u32 len | payload[len] | u32 row_checksum   (version 5)
//           | ROW    u8 1 | u64 rowid | u64 insert_time_ms | u32 len | payload[len]   (versions 1 to 4)
//           | REMOVE u8 2 | u32 count | u64 rowid[count]
//           | SRCID  u8 3 | u32 source_id | u64 last_rowid
//           | META   u8 4 | u64 next_rowid | u64 rows_inserted | u64 rows_removed
//           | RETURN u8 5 | u32 count | { u64 rowid | u32 deliveries | u64 due_ms }[count]   (version 3)
//           | DEDUP_KEY u8 6 | u64 insert_time_ms | u32 len | key[len]                       (version 4)
//           A prepared transaction's part (two-phase commit; docs/transactions.md), one chunk:
//           | TXN_ROW u8 8 | u64 txn | u64 insert_time_ms | u32 len | payload[len] | u32 row_checksum(0, payload)   (version 6)
//           | TXN_REMOVE u8 9 | u32 count | u64 txn | u64 rowid[count]                     (version 6)
//           | TXN_PREPARE u8 10 | u64 txn | u32 len | xid[len]                              (version 6)
//           | TXN_SRCID u8 12 | u64 txn | u32 source_id | u64 last_rowid | u8 reset            (version 7)
//           | TXN_ASK u8 14 | u32 count | u64 txn | u64 asked_id[count]                  (version 8)
//           | TXN_SUB_REMOVE u8 20 | u32 count | u64 txn | u32 sub | u64 rowid[count]     (version 10)
//           and its outcome, later:
//           | TXN_END u8 11 | u64 txn | u8 committed | u64 first_rowid                     (version 6)
//           | ID_FLOOR u8 13 | u64 floor                                                   (version 8)
//           History (HISTORY_RETENTION; core/row/ended_row.h):
//           | HISTORY u8 15 | u32 count | { u64 rowid | u64 end_ms | u8 kind | u16 deliveries }[count]   (version 9)
//           | HISTORY_ROW u8 16 | u64 rowid | u64 insert_time_ms | u32 len | payload[len] | u32 row_checksum
//                               | u64 end_ms | u8 kind | u16 deliveries                            (version 9)
//           Subscriptions (core/table/subscriptions.h):
//           | SUBSCRIBE u8 17 | u32 sub | u64 start_rowid | u32 name_len | name | u32 cond_len | cond   (version 9)
//           | UNSUBSCRIBE u8 18 | u32 sub                                                  (version 9)
//           | SUB_REMOVE u8 19 | u32 sub | u32 count | u64 rowid[count]                    (version 9)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/row/row_id.h"

namespace q4m::fmt {

constexpr char kFileMagic[8] = {'Q', '4', 'M', 'Q', 'U', 'E', 'U', 'E'};
// Written by this build (3 added RETURN records, 4 DEDUP_KEY, 5 a checksum in every ROW, 6 TXN_*,
// 7 TXN_SRCID, 8 ID_FLOOR and TXN_ASK, 9 HISTORY, HISTORY_ROW, SUBSCRIBE, UNSUBSCRIBE and SUB_REMOVE,
// 10 TXN_SUB_REMOVE).
constexpr uint32_t kFormatVersion = 10;
constexpr uint32_t kOldestFormatVersion = 1;  // still read (1 never sets kChunkUnsynced)
constexpr size_t kFileHeaderSize = 16;
constexpr uint32_t kChunkMagic = 0x434D3451u;  // bytes "Q4MC"
constexpr size_t kChunkHeaderSize = 16;
constexpr uint32_t kMaxChunkBody = 1u << 30;
// Set in a chunk header when no sync followed the chunk (sync mode none). After a power
// cut such chunks may have reached the disk only in part, in any order, so damage
// followed by nothing but such chunks is a lost tail, not corruption (docs/recovery.md).
constexpr uint32_t kChunkUnsynced = 1u << 31;
// A commit bigger than this is split into several chunks (still one write + one sync).
constexpr size_t kSplitChunkBody = 256u << 20;
constexpr uint32_t kMaxRowLength = kMaxChunkBody - 64;

enum RecordType : uint8_t {
  kRow = 1, kRemove = 2, kSrcId = 3, kMeta = 4, kReturn = 5, kDedupKey = 6,
  kTxnRow = 8, kTxnRemove = 9, kTxnPrepare = 10, kTxnEnd = 11, kTxnSrcId = 12, kIdFloor = 13, kTxnAsk = 14,
  kHistory = 15, kHistoryRow = 16,
  kSubscribe = 17, kUnsubscribe = 18, kSubRemove = 19,
  kTxnSubRemove = 20,
};
// The type byte of a ROW since version 5: kRow's layout with row_checksum() after the payload.
// RecordReader reports it as kRow (Record::checked); writers write no other ROW.
constexpr uint8_t kCheckedRow = 7;
constexpr size_t kRowHeaderSize = 1 + 8 + 8 + 4;
constexpr size_t kRowChecksumSize = 4;  // after a kCheckedRow's or a TXN_ROW's payload
constexpr size_t kRemoveHeaderSize = 1 + 4;
constexpr size_t kSrcIdSize = 1 + 4 + 8;
constexpr size_t kMetaSize = 1 + 8 + 8 + 8;
constexpr size_t kReturnHeaderSize = 1 + 4;
constexpr size_t kReturnEntrySize = 8 + 4 + 8;
constexpr size_t kDedupKeyHeaderSize = 1 + 8 + 4;  // then the key's bytes
constexpr size_t kTxnRowHeaderSize = 1 + 8 + 8 + 4;   // as ROW's, the transaction in place of the id
constexpr size_t kTxnRemoveHeaderSize = 1 + 4 + 8;   // then the ids
constexpr size_t kTxnPrepareHeaderSize = 1 + 8 + 4;  // then the xid's bytes
constexpr size_t kTxnEndSize = 1 + 8 + 1 + 8;
constexpr size_t kTxnSrcIdSize = 1 + 8 + 4 + 8 + 1;
constexpr size_t kIdFloorSize = 1 + 8;
constexpr size_t kTxnAskHeaderSize = 1 + 4 + 8;  // then one id per row of the part (0: none asked)
constexpr size_t kHistoryHeaderSize = 1 + 4;
constexpr size_t kHistoryEntrySize = 8 + 8 + 1 + 2;
constexpr size_t kHistoryRowEndSize = 8 + 1 + 2;  // after a HISTORY_ROW's checksum

// How a row ended (HISTORY, HISTORY_ROW): written before the REMOVE (or TXN_END) that ends it,
// in the same chunk, so that recovery finds the row still live and keeps it as history.
struct HistoryEntry {
  RowId id = 0;
  uint64_t end_ms = 0;
  uint8_t kind = 0;  // EndKind
  uint16_t deliveries = 0;
};
inline void put_history_end(std::string* o, uint64_t end_ms, uint8_t kind, uint16_t deliveries);
constexpr size_t kSubscribeHeaderSize = 1 + 4 + 8 + 4;  // then the name, u32 cond_len, the condition
constexpr size_t kUnsubscribeSize = 1 + 4;
constexpr size_t kSubRemoveHeaderSize = 1 + 4 + 4;  // then the ids
constexpr size_t kTxnSubRemoveHeaderSize = 1 + 4 + 8 + 4;  // then the ids

// A row that went back to the queue without being removed (queue_abort, a disconnect, an
// expired lease): how often it had been handed out by then, and when it may be handed out
// again (wall-clock ms; 0 = at once). Recovery keeps, per row, the entry with the most
// deliveries, so records that reach the file out of order do no harm.
struct ReturnedRow {
  RowId id = 0;
  uint32_t deliveries = 0;
  uint64_t due_ms = 0;
};

// A relay source's last row id as a commit sets it (queue_set_srcid): reset (mode 'w') sets
// it to `last`; otherwise it becomes the greater of the two.
struct SourceMark {
  uint32_t source = 0;
  RowId last = 0;
  bool reset = false;
  // The source's last id once this mark applies to `before` (its last id until then).
  RowId applied_to(RowId before) const { return reset || last > before ? last : before; }
};

struct Meta {
  RowId next_rowid = 1;
  uint64_t rows_inserted = 0;
  uint64_t rows_removed = 0;
  // Not in the META record: add_meta() follows it with an ID_FLOOR record while the floor is
  // above next_rowid (id_sequence.h), so every file rewrite keeps it.
  RowId id_floor = 0;
};

inline void put_u32(std::string* o, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (8 * i));
  o->append(b, 4);
}
inline void put_u64(std::string* o, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (8 * i));
  o->append(b, 8);
}
inline void store_u32(void* p, uint32_t v) {  // in place, same byte order as put_u32
  unsigned char* b = static_cast<unsigned char*>(p);
  for (int i = 0; i < 4; i++) b[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline uint32_t get_u32(const void* p) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}
inline uint64_t get_u64(const void* p) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  return uint64_t(get_u32(b)) | uint64_t(get_u32(b + 4)) << 32;
}

// One RETURN entry (kReturnEntrySize bytes); the index snapshot stores them the same way.
inline void put_returned_row(std::string* o, const ReturnedRow& r) {
  put_u64(o, r.id);
  put_u32(o, r.deliveries);
  put_u64(o, r.due_ms);
}
inline ReturnedRow get_returned_row(const void* p) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  return ReturnedRow{get_u64(b), get_u32(b + 8), get_u64(b + 12)};
}

inline void put_history_end(std::string* o, uint64_t end_ms, uint8_t kind, uint16_t deliveries) {
  put_u64(o, end_ms);
  o->push_back(static_cast<char>(kind));
  o->push_back(static_cast<char>(deliveries & 0xff));
  o->push_back(static_cast<char>(deliveries >> 8));
}
inline HistoryEntry get_history_end(const void* p, RowId id) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  return HistoryEntry{id, get_u64(b), b[8], static_cast<uint16_t>(b[9] | b[10] << 8)};
}

// What a ROW (kCheckedRow) carries after its payload: crc32c of the row id (8 bytes,
// little-endian) followed by the payload. The row id ties the bytes to their row, so bytes
// read from the wrong place do not pass either. Readers check it on every read from disk;
// the chunk checksum is checked only when recovery walks the file.
uint32_t row_checksum(RowId id, std::string_view payload);

std::string file_header();
// Empty string if `bytes` (kFileHeaderSize of them) is a valid header, else why not.
std::string check_file_header(std::string_view bytes);

// A chunk with no records, not flagged `unsynced`. A clean close appends it (and syncs) when
// the file's last chunk is flagged: it says that every chunk before it was synced, so recovery
// takes a damaged one for damage, not for a tail a power cut lost (docs/recovery.md).
std::string synced_mark_chunk();

// Appends records to `out`, grouped in chunks. Offsets returned are relative to the
// start of `out` (the caller adds the file position where `out` will be written).
class ChunkBuilder {
 public:
  // `unsynced`: no sync will follow these chunks (kChunkUnsynced).
  explicit ChunkBuilder(std::string* out, bool unsynced = false) : out_(out), unsynced_(unsynced) {}
  // Returns the offset of the payload bytes inside `out`.
  size_t add_row(RowId id, uint64_t time_ms, std::string_view payload) {
    return add_row(id, time_ms, payload, row_checksum(id, payload));
  }
  // A row with the checksum it was written with (compaction copying it): bytes that were
  // damaged on disk stay damaged in the copy instead of getting a checksum of their own.
  size_t add_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum);
  void add_remove(const RowId* ids, size_t count);
  void add_srcid(uint32_t source_id, RowId last_rowid);
  void add_meta(const Meta& meta);
  void add_returns(const ReturnedRow* rows, size_t count);
  // DEDUP_COLUMN: the key of a row inserted at time_ms, kept by compaction after the row
  // itself is gone, so that the key still counts until the table's dedup window is over.
  void add_dedup_key(uint64_t time_ms, std::string_view key);
  // A prepared transaction's part: its rows (each: the payload's offset, as add_row), its
  // removals, and last the prepare itself with the transaction's xid: a part whose
  // TXN_PREPARE did not reach the file was never prepared.
  // A TXN_ROW's checksum covers id 0: its row has no id until the commit.
  size_t add_txn_row(uint64_t txn, uint64_t time_ms, std::string_view payload) {
    return add_txn_row(txn, time_ms, payload, row_checksum(0, payload));
  }
  size_t add_txn_row(uint64_t txn, uint64_t time_ms, std::string_view payload, uint32_t checksum);
  void add_txn_remove(uint64_t txn, const RowId* ids, size_t count);
  void add_txn_prepare(uint64_t txn, std::string_view xid);
  // A relay source's last id, which the part sets if it commits (before its TXN_PREPARE).
  void add_txn_srcid(uint64_t txn, const SourceMark& mark);
  // The ids its rows ask for (ROW_ID_COLUMN), one per TXN_ROW in order, 0 for none; none of
  // them asking, no record (before its TXN_PREPARE).
  void add_txn_ask(uint64_t txn, const RowId* asked, size_t count);
  // Subscription `sub`'s ends of rows, which the part makes if it commits (a SUB_REMOVE then;
  // before its TXN_PREPARE).
  void add_txn_sub_remove(uint64_t txn, uint32_t sub, const RowId* ids, size_t count);
  // Its outcome: committed (its rows get ids from first_rowid on, as IdSequence gives them:
  // first_rowid, first_rowid + 1, ... unless a row asked for one or the floor is above) or not.
  void add_txn_end(uint64_t txn, bool committed, RowId first_rowid);
  // The least id a row that asks for none gets from here on (CREATE/ALTER ... AUTO_INCREMENT).
  void add_id_floor(RowId floor);
  // History (HISTORY_RETENTION): how rows ended, before the REMOVE or TXN_END that ends them.
  void add_history(const HistoryEntry* entries, size_t count);
  // A history row copied by compaction: its payload (with the checksum it must match) and how
  // it ended. Returns the payload's offset, as add_row.
  size_t add_history_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum,
                         const HistoryEntry& end);
  // Subscription `sub` (a number never reused in the file) named `name`, over the rows from
  // `start` on that match `condition` (empty: all); its end; rows it ended.
  void add_subscribe(uint32_t sub, RowId start, std::string_view name, std::string_view condition);
  void add_unsubscribe(uint32_t sub);
  void add_sub_remove(uint32_t sub, const RowId* ids, size_t count);
  // Closes the open chunk (fills its header). Safe to call when none is open.
  void finish();
  bool empty() const { return out_->empty(); }
  // Chunks opened so far, and whether one is open: a caller copying the bytes of some records
  // (a prepared part's redo) tells from them whether a chunk header fell among those bytes.
  size_t chunks_opened() const { return chunks_opened_; }
  bool chunk_open() const { return open_; }

 private:
  void reserve_record(size_t size);  // opens a chunk or splits a full one
  // TXN_REMOVE and TXN_ASK: type, count, the transaction, the ids.
  void add_txn_ids(RecordType type, uint64_t txn, const RowId* ids, size_t count);
  // ROW and TXN_ROW: type, the row id or transaction, time, payload, checksum; returns the
  // payload's offset in the chunk.
  size_t add_payload_record(uint8_t type, uint64_t key, uint64_t time_ms, std::string_view payload,
                            uint32_t checksum);
  // A record `type | u32 n | entry[n]` (REMOVE, RETURN), split so that one record stays well
  // inside a chunk; put(out, item) writes one entry of entry_size bytes.
  template <typename Item, typename Put>
  void add_counted(RecordType type, size_t entry_size, const Item* items, size_t count, Put put);
  std::string* out_;
  size_t chunk_start_ = 0;
  bool open_ = false;
  bool unsynced_ = false;
  size_t chunks_opened_ = 0;
};

struct ChunkHeader {
  uint32_t body_len = 0;
  uint32_t body_crc = 0;
  bool unsynced = false;  // kChunkUnsynced
};
// Empty string if the 16 header bytes at `p` are a valid chunk header, else why not.
std::string parse_chunk_header(const unsigned char* p, ChunkHeader* out);

struct Record {
  RecordType type = kRow;
  // kRow (kDedupKey: time_ms, and the key at payload_pos, `length` bytes)
  RowId rowid = 0;
  bool checked = false;   // kRow written as kCheckedRow: `checksum` follows the payload
  uint32_t checksum = 0;  // as stored (may not match damaged bytes: compaction keeps it)
  uint64_t time_ms = 0;
  size_t payload_pos = 0;  // offset of the payload inside the body
  uint32_t length = 0;
  // kRemove, kTxnAsk (with txn): `count` ids starting at body offset ids_pos; kReturn:
  // `count` entries there; kIdFloor: the floor in rowid
  uint32_t count = 0;
  size_t ids_pos = 0;
  // kSrcId, kTxnSrcId (with txn and reset)
  uint32_t source_id = 0;
  RowId last_rowid = 0;
  bool reset = false;
  // kMeta
  Meta meta;
  // kHistory: `count` entries at ids_pos; kHistoryRow: as kRow (checksum too), and `ended`
  HistoryEntry ended;
  // kTxnRow (with time_ms, payload_pos, length, checksum), kTxnRemove (with count, ids_pos),
  // kTxnPrepare (the xid at payload_pos, `length` bytes), kTxnEnd
  uint64_t txn = 0;
  bool committed = false;
  RowId first_rowid = 0;
  // kSubscribe (start in rowid, the name at payload_pos, `length` bytes, the condition at
  // cond_pos, cond_length bytes), kUnsubscribe, kSubRemove (with count, ids_pos), kTxnSubRemove
  // (with txn, sub, count, ids_pos)
  uint32_t sub = 0;
  size_t cond_pos = 0;
  uint32_t cond_length = 0;
};

// Walks the records of one checksummed chunk body.
class RecordReader {
 public:
  explicit RecordReader(std::string_view body) : body_(body) {}
  // false at the end or on a malformed record (then error() is non-empty).
  bool next(Record* r);
  const std::string& error() const { return error_; }
  size_t position() const { return pos_; }
  RowId removed_id(const Record& r, uint32_t i) const { return get_u64(body_.data() + r.ids_pos + 8 * i); }
  HistoryEntry history_entry(const Record& r, uint32_t i) const {
    const char* p = body_.data() + r.ids_pos + kHistoryEntrySize * i;
    return get_history_end(p + 8, get_u64(p));
  }
  ReturnedRow returned_row(const Record& r, uint32_t i) const {
    return get_returned_row(body_.data() + r.ids_pos + kReturnEntrySize * i);
  }

 private:
  std::string_view body_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace q4m::fmt
