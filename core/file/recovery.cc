#include "core/file/recovery.h"

#include "core/file/row_source.h"

#include <algorithm>
#include <cstring>

#include "core/file/block_reader.h"
#include "core/row/id_sequence.h"
#include "core/util/crc32c.h"
#include "core/util/stats.h"

namespace q4m {
namespace {

// Why the chunk at `pos` is bad ("" if it is valid). *end = offset after it and
// *unsynced = its kChunkUnsynced flag, set whenever its header is valid (its length can
// then be trusted), else left 0 / false.
std::string check_chunk(BlockReader& r, uint64_t pos, uint64_t size, uint64_t* end, bool* unsynced, Status* io) {
  *end = 0;
  *unsynced = false;
  if (size - pos < fmt::kChunkHeaderSize) return "chunk header is truncated";
  const unsigned char* p = nullptr;
  *io = r.get(pos, fmt::kChunkHeaderSize, &p);
  if (!io->ok()) return "read failed";
  fmt::ChunkHeader h;
  std::string why = fmt::parse_chunk_header(p, &h);
  if (!why.empty()) return why;
  *end = pos + fmt::kChunkHeaderSize + h.body_len;
  *unsynced = h.unsynced;
  if (size - pos - fmt::kChunkHeaderSize < h.body_len) return "chunk body is truncated";
  *io = r.get(pos + fmt::kChunkHeaderSize, h.body_len, &p);
  if (!io->ok()) return "read failed";
  if (crc32c(p, h.body_len) != h.body_crc) return "chunk body checksum mismatch";
  return "";
}

// Is there a valid chunk written in a durable sync mode starting at or after `from`?
// (Then the bad chunk before it is corruption: that chunk was synced before the later
// one was written.) Every byte offset is tried: a damaged header gives no length.
// Chunks flagged kChunkUnsynced do not count: without a sync, a power cut may keep a
// later one and lose an earlier one.
Status durable_chunk_from(const DataFile& f, uint64_t from, uint64_t size, bool* found) {
  *found = false;
  BlockReader scan(f, size), verify(f, size);
  unsigned char magic[4];
  for (int i = 0; i < 4; i++) magic[i] = static_cast<unsigned char>(fmt::kChunkMagic >> (8 * i));
  for (uint64_t pos = from; pos + fmt::kChunkHeaderSize <= size; pos++) {
    const unsigned char* p = nullptr;
    Status s = scan.get(pos, 4, &p);
    if (!s.ok()) return s;
    if (std::memcmp(p, magic, 4) != 0) continue;
    uint64_t end;
    bool unsynced = false;
    std::string why = check_chunk(verify, pos, size, &end, &unsynced, &s);
    if (!s.ok()) return s;
    if (why.empty() && !unsynced) {
      *found = true;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Is [from, size) all zero bytes? (The zero-filled preallocation of a durable-mode
// table that was not closed cleanly: no data, nothing to report.)
Status all_zero(const DataFile& f, uint64_t from, uint64_t size, bool* zero) {
  *zero = true;
  BlockReader r(f, size);
  constexpr uint64_t kStep = 64 * 1024;
  for (uint64_t pos = from; pos < size && *zero; pos += kStep) {
    size_t n = static_cast<size_t>(size - pos < kStep ? size - pos : kStep);
    const unsigned char* p = nullptr;
    Status s = r.get(pos, n, &p);
    if (!s.ok()) return s;
    for (size_t i = 0; i < n; i++)
      if (p[i] != 0) {
        *zero = false;
        break;
      }
  }
  return Status::Ok();
}

Status corrupt(const DataFile& f, uint64_t pos, const std::string& why) {
  return Status(ErrorCode::kCorrupt, "file " + f.path() + ": corrupt chunk at offset " + std::to_string(pos) + ": " + why);
}

Status apply_chunk(const DataFile& f, uint64_t pos, std::string_view body, RecoveredTable* t, RowId* last_row) {
  fmt::RecordReader rr(body);
  fmt::Record rec;
  uint64_t body_pos = pos + fmt::kChunkHeaderSize;
  while (rr.next(&rec)) {
    switch (rec.type) {
      case fmt::kRow: {
        if (rec.rowid == 0 || rec.rowid <= *last_row)
          return corrupt(f, pos, "row id " + std::to_string(rec.rowid) + " is not increasing");
        *last_row = rec.rowid;
        RowEntry e;
        e.id = rec.rowid;
        e.offset = body_pos + rec.payload_pos;
        e.length = rec.length;
        e.time_ms = rec.time_ms;
        t->index.append(e);
        if (!rec.checked)  // format 1 to 4: the checksum of the bytes its chunk's checksum just passed
          t->known_sums.add(rec.rowid, fmt::row_checksum(rec.rowid, body.substr(rec.payload_pos, rec.length)));
        t->rows_inserted++;
        if (rec.rowid >= t->next_rowid) t->next_rowid = rec.rowid + 1;
        break;
      }
      case fmt::kRemove:
        for (uint32_t i = 0; i < rec.count; i++) {
          const RowId id = rr.removed_id(rec, i);
          if (!t->index.remove(id)) continue;
          t->rows_removed++;
          if (!t->due_ms.empty()) t->due_ms.erase(id);
        }
        break;
      case fmt::kReturn:
        for (uint32_t i = 0; i < rec.count; i++) apply_returned_row(rr.returned_row(rec, i), t);
        break;
      case fmt::kSrcId:
        t->sources[rec.source_id] = rec.last_rowid;
        break;
      case fmt::kDedupKey:  // read by the dedup window when the engine names DEDUP_COLUMN
        break;
      case fmt::kMeta:  // absolute state as of this point of the file
        if (rec.meta.next_rowid > t->next_rowid) t->next_rowid = rec.meta.next_rowid;
        t->rows_inserted = rec.meta.rows_inserted;
        t->rows_removed = rec.meta.rows_removed;
        break;
      case fmt::kHistory:
        for (uint32_t i = 0; i < rec.count; i++) {
          const fmt::HistoryEntry h = rr.history_entry(rec, i);
          const RowEntry* e = t->index.find(h.id);
          if (!e) continue;  // not live: its end is not this record's
          EndedRow r;
          r.id = e->id;
          r.offset = e->offset;
          r.time_ms = e->time_ms;
          r.length = e->length;
          if (const uint32_t* sum = t->known_sums.find(e->id)) {
            r.stored = false;
            r.known = *sum;
          } else {
            r.id_less = e->txn_row;
          }
          r.end_ms = h.end_ms;
          r.kind = static_cast<EndKind>(h.kind);
          r.deliveries = h.deliveries;
          t->ended.push_back(r);
        }
        break;
      case fmt::kHistoryRow: {
        EndedRow r;
        r.id = rec.rowid;
        r.offset = body_pos + rec.payload_pos;
        r.time_ms = rec.time_ms;
        r.length = rec.length;
        r.end_ms = rec.ended.end_ms;
        r.kind = static_cast<EndKind>(rec.ended.kind);
        r.deliveries = rec.ended.deliveries;
        t->ended.push_back(r);
        break;
      }
      case fmt::kTxnRow: {
        RowEntry e;
        e.offset = body_pos + rec.payload_pos;
        e.length = rec.length;
        e.time_ms = rec.time_ms;
        PreparedPart& part = t->prepared[rec.txn];
        part.rows.push_back(e);
        t->next_txn = std::max(t->next_txn, rec.txn + 1);
        break;
      }
      case fmt::kTxnRemove: {
        PreparedPart& part = t->prepared[rec.txn];
        for (uint32_t i = 0; i < rec.count; i++) part.removals.push_back(rr.removed_id(rec, i));
        t->next_txn = std::max(t->next_txn, rec.txn + 1);
        break;
      }
      case fmt::kIdFloor:
        t->id_floor = std::max(t->id_floor, rec.rowid);
        break;
      case fmt::kSubscribe: {
        RecoveredSubscription& sub = t->subscriptions[rec.sub];
        sub.name.assign(body.data() + rec.payload_pos, rec.length);
        sub.condition.assign(body.data() + rec.cond_pos, rec.cond_length);
        sub.start = rec.rowid;
        t->next_subscription = std::max(t->next_subscription, rec.sub + 1);
        break;
      }
      case fmt::kUnsubscribe:
        t->subscriptions.erase(rec.sub);
        t->next_subscription = std::max(t->next_subscription, rec.sub + 1);
        break;
      case fmt::kSubRemove: {
        auto it = t->subscriptions.find(rec.sub);
        if (it == t->subscriptions.end()) break;  // dropped since
        for (uint32_t i = 0; i < rec.count; i++) it->second.ended.push_back(rr.removed_id(rec, i));
        break;
      }
      case fmt::kTxnSubRemove: {
        PreparedPart& part = t->prepared[rec.txn];
        part.sub = rec.sub;
        for (uint32_t i = 0; i < rec.count; i++) part.sub_removals.push_back(rr.removed_id(rec, i));
        t->next_txn = std::max(t->next_txn, rec.txn + 1);
        break;
      }
      case fmt::kTxnAsk: {
        PreparedPart& part = t->prepared[rec.txn];
        for (uint32_t i = 0; i < rec.count; i++) part.asked.push_back(rr.removed_id(rec, i));
        t->next_txn = std::max(t->next_txn, rec.txn + 1);
        break;
      }
      case fmt::kTxnSrcId: {
        PreparedPart& part = t->prepared[rec.txn];
        part.relay.push_back(fmt::SourceMark{rec.source_id, rec.last_rowid, rec.reset});
        t->next_txn = std::max(t->next_txn, rec.txn + 1);
        break;
      }
      case fmt::kTxnPrepare: {
        PreparedPart& part = t->prepared[rec.txn];
        part.prepared = true;
        part.xid.assign(body.data() + rec.payload_pos, rec.length);
        t->next_txn = std::max(t->next_txn, rec.txn + 1);
        break;
      }
      case fmt::kTxnEnd: {
        auto it = t->prepared.find(rec.txn);
        if (it == t->prepared.end()) break;  // ended before (a compaction keeps no ended part)
        if (rec.committed) {
          IdSequence ids{rec.first_rowid, t->id_floor};  // the ids the writer gave
          const PreparedPart& part = it->second;
          for (size_t k = 0; k < part.rows.size(); k++) {
            RowEntry e = part.rows[k];
            const RowId id = ids.give(k < part.asked.size() ? part.asked[k] : 0);
            if (id <= *last_row) return corrupt(f, pos, "row id " + std::to_string(id) + " is not increasing");
            e.id = *last_row = id;
            // Its record's checksum covers id 0: reads check the bytes with it (a damaged
            // one stays damaged), and the block may fold (RowEntry::txn_row).
            e.txn_row = true;
            t->index.append(e, body_pos + rr.position());  // this TXN_END's end: folds read to it alone
            t->rows_inserted++;
          }
          if (ids.next > t->next_rowid) t->next_rowid = ids.next;
          for (const fmt::SourceMark& m : part.relay) t->sources[m.source] = m.applied_to(t->sources[m.source]);
          if (!part.sub_removals.empty()) {  // as a SUB_REMOVE here
            auto sub = t->subscriptions.find(part.sub);
            if (sub != t->subscriptions.end())
              sub->second.ended.insert(sub->second.ended.end(), part.sub_removals.begin(), part.sub_removals.end());
          }
          for (RowId removed : it->second.removals) {
            if (!t->index.remove(removed)) continue;
            t->rows_removed++;
            if (!t->due_ms.empty()) t->due_ms.erase(removed);
          }
        }
        t->prepared.erase(it);
        break;
      }
    }
  }
  if (!rr.error().empty()) return corrupt(f, pos, rr.error());
  return Status::Ok();
}

}  // namespace

void apply_returned_row(const fmt::ReturnedRow& r, RecoveredTable* t) {
  RowEntry* e = t->index.find(r.id);
  if (!e) return;  // removed since, or truncated away
  const uint16_t deliveries = r.deliveries > UINT16_MAX ? UINT16_MAX : static_cast<uint16_t>(r.deliveries);
  if (deliveries < e->deliveries) return;  // an older return, written after a newer one
  e->deliveries = deliveries;
  if (r.due_ms) t->due_ms[r.id] = r.due_ms;
  else if (!t->due_ms.empty()) t->due_ms.erase(r.id);
}

Status recover_table(DataFile& file, RecoveredTable* out) {
  uint64_t size = file.size();
  std::string header;
  if (size < fmt::kFileHeaderSize)
    return Status(ErrorCode::kCorrupt, "file " + file.path() + ": file header is truncated");
  Status s = file.read(0, fmt::kFileHeaderSize, &header);
  if (!s.ok()) return s;
  std::string why = fmt::check_file_header(header);
  if (!why.empty()) return Status(ErrorCode::kCorrupt, "file " + file.path() + ": " + why);

  out->index.set_source(FileRowSource::borrowing(file));  // blocks of plain rows fold as they are read
  BlockReader reader(file, size);
  RowId last_row = 0;
  uint64_t pos = fmt::kFileHeaderSize;
  while (pos < size) {
    uint64_t end = 0;
    bool unsynced = false;
    why = check_chunk(reader, pos, size, &end, &unsynced, &s);
    if (!s.ok()) return s;
    if (!why.empty()) {
      bool preallocated = false;
      s = all_zero(file, pos, size, &preallocated);
      if (!s.ok()) return s;
      if (preallocated) {
        s = file.truncate_to(pos);
        if (!s.ok()) return s;
        break;
      }
      // With an intact header, nothing can start inside its body (which may hold any
      // bytes, even a chunk image inside a payload): look only past its end.
      bool later_durable = false;
      s = durable_chunk_from(file, end ? end : pos + 1, size, &later_durable);
      if (!s.ok()) return s;
      if (later_durable) return corrupt(file, pos, why);
      // A torn write at the tail (nothing after it was acknowledged), or a power cut in
      // sync mode none that lost part of the unsynced tail (which was only ever promised
      // to survive a server crash): cut, keep everything before.
      out->dropped_tail_bytes = size - pos;
      s = file.truncate_to(pos);
      if (!s.ok()) return s;
      break;
    }
    const unsigned char* body = nullptr;
    s = reader.get(pos + fmt::kChunkHeaderSize, end - pos - fmt::kChunkHeaderSize, &body);
    if (!s.ok()) return s;
    s = apply_chunk(file, pos, std::string_view(reinterpret_cast<const char*>(body), end - pos - fmt::kChunkHeaderSize),
                    out, &last_row);
    if (!s.ok()) return s;
    out->chunks++;
    pos = end;
  }
  // A part whose prepare did not reach the file was never prepared: nobody was told it was.
  for (auto it = out->prepared.begin(); it != out->prepared.end();)
    it = it->second.prepared ? std::next(it) : out->prepared.erase(it);
  out->known_sums.retain([&](RowId id) { return out->index.find(id) != nullptr; });  // live rows only
  global_stats().recoveries.add();
  return Status::Ok();
}

Status for_each_record(const DataFile& file, uint64_t size,
                       const std::function<void(const fmt::Record& r, std::string_view body)>& fn) {
  BlockReader reader(file, size);
  uint64_t pos = fmt::kFileHeaderSize;
  while (pos < size) {
    uint64_t end = 0;
    bool unsynced = false;
    Status s;
    const std::string why = check_chunk(reader, pos, size, &end, &unsynced, &s);
    if (!s.ok()) return s;
    if (!why.empty()) return corrupt(file, pos, why);
    const unsigned char* p = nullptr;
    s = reader.get(pos + fmt::kChunkHeaderSize, end - pos - fmt::kChunkHeaderSize, &p);
    if (!s.ok()) return s;
    const std::string_view body(reinterpret_cast<const char*>(p), end - pos - fmt::kChunkHeaderSize);
    fmt::RecordReader rr(body);
    fmt::Record rec;
    while (rr.next(&rec)) fn(rec, body);
    if (!rr.error().empty()) return corrupt(file, pos, rr.error());
    pos = end;
  }
  return Status::Ok();
}

}  // namespace q4m
