#include "core/file/format.h"

#include <algorithm>
#include <cstring>

#include "core/util/crc32c.h"

namespace q4m::fmt {

uint32_t row_checksum(RowId id, std::string_view payload) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<unsigned char>(id >> (8 * i));
  return crc32c_extend(crc32c(b, sizeof(b)), payload.data(), payload.size());
}

std::string file_header() {
  std::string h(kFileMagic, sizeof(kFileMagic));
  put_u32(&h, kFormatVersion);
  put_u32(&h, crc32c(h));
  return h;
}

std::string synced_mark_chunk() {
  std::string c(kChunkHeaderSize, '\0');
  store_u32(&c[0], kChunkMagic);
  store_u32(&c[4], 0);  // no body, no kChunkUnsynced
  store_u32(&c[8], crc32c(c.data(), 0));
  store_u32(&c[12], crc32c(c.data(), 12));
  return c;
}

std::string check_file_header(std::string_view b) {
  if (b.size() < kFileHeaderSize) return "file header is truncated";
  if (std::memcmp(b.data(), kFileMagic, sizeof(kFileMagic)) != 0) return "not a QUEUE data file (bad magic)";
  if (crc32c(b.data(), 12) != get_u32(b.data() + 12)) return "file header checksum mismatch";
  uint32_t version = get_u32(b.data() + 8);
  if (version < kOldestFormatVersion || version > kFormatVersion)
    return "unsupported format version " + std::to_string(version) + " (this build reads " +
           std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) + ")";
  return "";
}

void ChunkBuilder::reserve_record(size_t size) {
  if (open_ && out_->size() - chunk_start_ - kChunkHeaderSize + size > kSplitChunkBody) finish();
  if (!open_) {
    chunk_start_ = out_->size();
    out_->append(kChunkHeaderSize, '\0');
    open_ = true;
    chunks_opened_++;
  }
}

static_assert(kRowHeaderSize == kTxnRowHeaderSize, "ROW and TXN_ROW share one layout: type, u64, time, length");

size_t ChunkBuilder::add_payload_record(uint8_t type, uint64_t key, uint64_t time_ms, std::string_view payload,
                                        uint32_t checksum) {
  reserve_record(kRowHeaderSize + payload.size() + kRowChecksumSize);
  out_->push_back(static_cast<char>(type));
  put_u64(out_, key);
  put_u64(out_, time_ms);
  put_u32(out_, static_cast<uint32_t>(payload.size()));
  size_t pos = out_->size();
  out_->append(payload);
  put_u32(out_, checksum);
  return pos;
}

size_t ChunkBuilder::add_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum) {
  return add_payload_record(kCheckedRow, id, time_ms, payload, checksum);
}

static_assert(kRemoveHeaderSize == kReturnHeaderSize, "counted records share one header layout: type, u32 count");

template <typename Item, typename Put>
void ChunkBuilder::add_counted(RecordType type, size_t entry_size, const Item* items, size_t count, Put put) {
  constexpr size_t kMaxPerRecord = 1u << 20;
  while (count > 0) {
    size_t n = count < kMaxPerRecord ? count : kMaxPerRecord;
    reserve_record(kRemoveHeaderSize + entry_size * n);
    out_->push_back(static_cast<char>(type));
    put_u32(out_, static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; i++) put(out_, items[i]);
    items += n;
    count -= n;
  }
}

void ChunkBuilder::add_remove(const RowId* ids, size_t count) {
  add_counted(kRemove, 8, ids, count, [](std::string* o, RowId id) { put_u64(o, id); });
}

void ChunkBuilder::add_srcid(uint32_t source_id, RowId last_rowid) {
  reserve_record(kSrcIdSize);
  out_->push_back(static_cast<char>(kSrcId));
  put_u32(out_, source_id);
  put_u64(out_, last_rowid);
}

void ChunkBuilder::add_meta(const Meta& m) {
  reserve_record(kMetaSize);
  out_->push_back(static_cast<char>(kMeta));
  put_u64(out_, m.next_rowid);
  put_u64(out_, m.rows_inserted);
  put_u64(out_, m.rows_removed);
  if (m.id_floor > m.next_rowid) add_id_floor(m.id_floor);
}

void ChunkBuilder::add_subscribe(uint32_t sub, RowId start, std::string_view name, std::string_view condition) {
  reserve_record(kSubscribeHeaderSize + name.size() + 4 + condition.size());
  out_->push_back(static_cast<char>(kSubscribe));
  put_u32(out_, sub);
  put_u64(out_, start);
  put_u32(out_, static_cast<uint32_t>(name.size()));
  out_->append(name.data(), name.size());
  put_u32(out_, static_cast<uint32_t>(condition.size()));
  out_->append(condition.data(), condition.size());
}

void ChunkBuilder::add_unsubscribe(uint32_t sub) {
  reserve_record(kUnsubscribeSize);
  out_->push_back(static_cast<char>(kUnsubscribe));
  put_u32(out_, sub);
}

void ChunkBuilder::add_sub_remove(uint32_t sub, const RowId* ids, size_t count) {
  constexpr size_t kPerRecord = 1u << 16;  // one record stays well inside a chunk
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(kPerRecord, count - done);
    reserve_record(kSubRemoveHeaderSize + 8 * n);
    out_->push_back(static_cast<char>(kSubRemove));
    put_u32(out_, sub);
    put_u32(out_, static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; i++) put_u64(out_, ids[done + i]);
    done += n;
  }
}

void ChunkBuilder::add_id_floor(RowId floor) {
  reserve_record(kIdFloorSize);
  out_->push_back(static_cast<char>(kIdFloor));
  put_u64(out_, floor);
}

void ChunkBuilder::add_returns(const ReturnedRow* rows, size_t count) {
  add_counted(kReturn, kReturnEntrySize, rows, count, put_returned_row);
}

void ChunkBuilder::add_dedup_key(uint64_t time_ms, std::string_view key) {
  reserve_record(kDedupKeyHeaderSize + key.size());
  out_->push_back(static_cast<char>(kDedupKey));
  put_u64(out_, time_ms);
  put_u32(out_, static_cast<uint32_t>(key.size()));
  out_->append(key);
}

size_t ChunkBuilder::add_txn_row(uint64_t txn, uint64_t time_ms, std::string_view payload, uint32_t checksum) {
  return add_payload_record(kTxnRow, txn, time_ms, payload, checksum);
}

void ChunkBuilder::add_txn_ids(RecordType type, uint64_t txn, const RowId* ids, size_t count) {
  reserve_record(kTxnRemoveHeaderSize + 8 * count);
  out_->push_back(static_cast<char>(type));
  put_u32(out_, static_cast<uint32_t>(count));
  put_u64(out_, txn);
  for (size_t i = 0; i < count; i++) put_u64(out_, ids[i]);
}

void ChunkBuilder::add_txn_remove(uint64_t txn, const RowId* ids, size_t count) {
  add_txn_ids(kTxnRemove, txn, ids, count);
}

void ChunkBuilder::add_txn_prepare(uint64_t txn, std::string_view xid) {
  reserve_record(kTxnPrepareHeaderSize + xid.size());
  out_->push_back(static_cast<char>(kTxnPrepare));
  put_u64(out_, txn);
  put_u32(out_, static_cast<uint32_t>(xid.size()));
  out_->append(xid);
}

void ChunkBuilder::add_txn_srcid(uint64_t txn, const SourceMark& mark) {
  reserve_record(kTxnSrcIdSize);
  out_->push_back(static_cast<char>(kTxnSrcId));
  put_u64(out_, txn);
  put_u32(out_, mark.source);
  put_u64(out_, mark.last);
  out_->push_back(mark.reset ? 1 : 0);
}

static_assert(kTxnAskHeaderSize == kTxnRemoveHeaderSize, "TXN_ASK has TXN_REMOVE's layout: type, count, txn, ids");

void ChunkBuilder::add_txn_ask(uint64_t txn, const RowId* asked, size_t count) {
  add_txn_ids(kTxnAsk, txn, asked, count);
}

void ChunkBuilder::add_txn_sub_remove(uint64_t txn, uint32_t sub, const RowId* ids, size_t count) {
  reserve_record(kTxnSubRemoveHeaderSize + 8 * count);
  out_->push_back(static_cast<char>(kTxnSubRemove));
  put_u32(out_, static_cast<uint32_t>(count));
  put_u64(out_, txn);
  put_u32(out_, sub);
  for (size_t i = 0; i < count; i++) put_u64(out_, ids[i]);
}

void ChunkBuilder::add_txn_end(uint64_t txn, bool committed, RowId first_rowid) {
  reserve_record(kTxnEndSize);
  out_->push_back(static_cast<char>(kTxnEnd));
  put_u64(out_, txn);
  out_->push_back(committed ? 1 : 0);
  put_u64(out_, first_rowid);
}

void ChunkBuilder::add_history(const HistoryEntry* entries, size_t count) {
  add_counted(kHistory, kHistoryEntrySize, entries, count, [](std::string* o, const HistoryEntry& e) {
    put_u64(o, e.id);
    put_history_end(o, e.end_ms, e.kind, e.deliveries);
  });
}

size_t ChunkBuilder::add_history_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum,
                                     const HistoryEntry& end) {
  reserve_record(kRowHeaderSize + payload.size() + kRowChecksumSize + kHistoryRowEndSize);
  const size_t pos = add_payload_record(kHistoryRow, id, time_ms, payload, checksum);
  put_history_end(out_, end.end_ms, end.kind, end.deliveries);
  return pos;
}

void ChunkBuilder::finish() {
  if (!open_) return;
  open_ = false;
  char* h = &(*out_)[chunk_start_];
  const char* body = h + kChunkHeaderSize;
  size_t body_len = out_->size() - chunk_start_ - kChunkHeaderSize;
  store_u32(h, kChunkMagic);
  store_u32(h + 4, static_cast<uint32_t>(body_len) | (unsynced_ ? kChunkUnsynced : 0));
  store_u32(h + 8, crc32c(body, body_len));
  store_u32(h + 12, crc32c(h, 12));
}

std::string parse_chunk_header(const unsigned char* p, ChunkHeader* out) {
  if (get_u32(p) != kChunkMagic) return "bad chunk magic";
  if (crc32c(p, 12) != get_u32(p + 12)) return "chunk header checksum mismatch";
  const uint32_t flags_and_len = get_u32(p + 4);
  out->body_len = flags_and_len & ~kChunkUnsynced;
  out->unsynced = (flags_and_len & kChunkUnsynced) != 0;
  out->body_crc = get_u32(p + 8);
  if (out->body_len > kMaxChunkBody) return "chunk length " + std::to_string(out->body_len) + " too large";
  return "";
}

bool RecordReader::next(Record* r) {
  if (pos_ >= body_.size()) return false;
  const char* p = body_.data() + pos_;
  size_t left = body_.size() - pos_;
  auto need = [&](size_t n) {
    if (left >= n) return true;
    error_ = "record at body offset " + std::to_string(pos_) + " is truncated";
    return false;
  };
  // REMOVE and RETURN: `count` entries of entry_size bytes after the shared header.
  auto counted = [&](size_t entry_size) {
    if (!need(kRemoveHeaderSize)) return false;
    r->count = get_u32(p + 1);
    if (!need(kRemoveHeaderSize + entry_size * size_t(r->count))) return false;
    r->ids_pos = pos_ + kRemoveHeaderSize;
    pos_ += kRemoveHeaderSize + entry_size * size_t(r->count);
    return true;
  };
  // ROW and DEDUP_KEY: a header ending in time_ms and a u32 length, then that many bytes,
  // then `trailer` more (a kCheckedRow's checksum).
  auto with_bytes = [&](size_t header_size, size_t trailer = 0) {
    if (!need(header_size)) return false;
    r->time_ms = get_u64(p + header_size - 12);
    r->length = get_u32(p + header_size - 4);
    if (!need(header_size + size_t(r->length) + trailer)) return false;
    r->payload_pos = pos_ + header_size;
    pos_ += header_size + r->length + trailer;
    return true;
  };
  r->checked = static_cast<unsigned char>(p[0]) == kCheckedRow;
  r->type = r->checked ? kRow : static_cast<RecordType>(static_cast<unsigned char>(p[0]));
  switch (r->type) {
    case kRow:
      if (!need(kRowHeaderSize)) return false;
      r->rowid = get_u64(p + 1);
      if (!with_bytes(kRowHeaderSize, r->checked ? kRowChecksumSize : 0)) return false;
      if (r->checked) r->checksum = get_u32(body_.data() + r->payload_pos + r->length);
      return true;
    case kRemove:
      return counted(8);
    case kSrcId:
      if (!need(kSrcIdSize)) return false;
      r->source_id = get_u32(p + 1);
      r->last_rowid = get_u64(p + 5);
      pos_ += kSrcIdSize;
      return true;
    case kMeta:
      if (!need(kMetaSize)) return false;
      r->meta.next_rowid = get_u64(p + 1);
      r->meta.rows_inserted = get_u64(p + 9);
      r->meta.rows_removed = get_u64(p + 17);
      pos_ += kMetaSize;
      return true;
    case kReturn:
      return counted(kReturnEntrySize);
    case kDedupKey:
      return with_bytes(kDedupKeyHeaderSize);
    case kTxnRow:
      if (!need(kTxnRowHeaderSize)) return false;
      r->txn = get_u64(p + 1);
      if (!with_bytes(kTxnRowHeaderSize, kRowChecksumSize)) return false;
      r->checksum = get_u32(body_.data() + r->payload_pos + r->length);
      return true;
    case kTxnRemove:
    case kTxnAsk:  // the same layout
      if (!need(kTxnRemoveHeaderSize)) return false;
      r->count = get_u32(p + 1);
      r->txn = get_u64(p + 5);
      if (!need(kTxnRemoveHeaderSize + 8 * size_t(r->count))) return false;
      r->ids_pos = pos_ + kTxnRemoveHeaderSize;
      pos_ += kTxnRemoveHeaderSize + 8 * size_t(r->count);
      return true;
    case kTxnPrepare:
      if (!need(kTxnPrepareHeaderSize)) return false;
      r->txn = get_u64(p + 1);
      r->length = get_u32(p + 9);
      if (!need(kTxnPrepareHeaderSize + size_t(r->length))) return false;
      r->payload_pos = pos_ + kTxnPrepareHeaderSize;
      pos_ += kTxnPrepareHeaderSize + r->length;
      return true;
    case kTxnEnd:
      if (!need(kTxnEndSize)) return false;
      r->txn = get_u64(p + 1);
      r->committed = p[9] != 0;
      r->first_rowid = get_u64(p + 10);
      pos_ += kTxnEndSize;
      return true;
    case kSubscribe: {
      if (!need(kSubscribeHeaderSize)) return false;
      r->sub = get_u32(p + 1);
      r->rowid = get_u64(p + 5);
      r->length = get_u32(p + 13);
      if (!need(kSubscribeHeaderSize + size_t(r->length) + 4)) return false;
      r->payload_pos = pos_ + kSubscribeHeaderSize;
      r->cond_length = get_u32(p + kSubscribeHeaderSize + r->length);
      const size_t total = kSubscribeHeaderSize + size_t(r->length) + 4 + size_t(r->cond_length);
      if (!need(total)) return false;
      r->cond_pos = r->payload_pos + r->length + 4;
      pos_ += total;
      return true;
    }
    case kUnsubscribe:
      if (!need(kUnsubscribeSize)) return false;
      r->sub = get_u32(p + 1);
      pos_ += kUnsubscribeSize;
      return true;
    case kSubRemove:
      if (!need(kSubRemoveHeaderSize)) return false;
      r->sub = get_u32(p + 1);
      r->count = get_u32(p + 5);
      if (!need(kSubRemoveHeaderSize + 8 * size_t(r->count))) return false;
      r->ids_pos = pos_ + kSubRemoveHeaderSize;
      pos_ += kSubRemoveHeaderSize + 8 * size_t(r->count);
      return true;
    case kTxnSubRemove:
      if (!need(kTxnSubRemoveHeaderSize)) return false;
      r->count = get_u32(p + 1);
      r->txn = get_u64(p + 5);
      r->sub = get_u32(p + 13);
      if (!need(kTxnSubRemoveHeaderSize + 8 * size_t(r->count))) return false;
      r->ids_pos = pos_ + kTxnSubRemoveHeaderSize;
      pos_ += kTxnSubRemoveHeaderSize + 8 * size_t(r->count);
      return true;
    case kIdFloor:
      if (!need(kIdFloorSize)) return false;
      r->rowid = get_u64(p + 1);
      pos_ += kIdFloorSize;
      return true;
    case kHistory:
      return counted(kHistoryEntrySize);
    case kHistoryRow:
      if (!need(kRowHeaderSize)) return false;
      r->rowid = get_u64(p + 1);
      if (!with_bytes(kRowHeaderSize, kRowChecksumSize + kHistoryRowEndSize)) return false;
      r->checksum = get_u32(body_.data() + r->payload_pos + r->length);
      r->ended = get_history_end(body_.data() + r->payload_pos + r->length + kRowChecksumSize, r->rowid);
      return true;
    case kTxnSrcId:
      if (!need(kTxnSrcIdSize)) return false;
      r->txn = get_u64(p + 1);
      r->source_id = get_u32(p + 9);
      r->last_rowid = get_u64(p + 13);
      r->reset = p[21] != 0;
      pos_ += kTxnSrcIdSize;
      return true;
  }
  error_ = "unknown record type " + std::to_string(static_cast<unsigned>(r->type)) + " at body offset " +
           std::to_string(pos_);
  return false;
}

}  // namespace q4m::fmt
