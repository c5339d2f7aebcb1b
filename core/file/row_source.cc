#include "core/file/row_source.h"

#include <map>
#include <string>

#include "core/file/format.h"

namespace q4m {

namespace {
constexpr uint64_t kReadPast = 64u << 10;  // read past the last row's payload when its record's end is not known
}

Status FileRowSource::rows(uint64_t first_payload, RowId start_id, uint64_t last_payload, RowId first, RowId last,
                           std::vector<RowEntry>* out, uint64_t* end) const {
  auto not_rows = [&](uint64_t at, const char* what) {
    return Status(ErrorCode::kDamaged, "file " + file_->path() + ": " + what + " at offset " + std::to_string(at) +
                                           " (bytes " + std::to_string(first_payload) + " to " + std::to_string(last_payload) +
                                           " should hold the rows' records)");
  };
  if (first_payload < fmt::kFileHeaderSize + fmt::kRowHeaderSize || last_payload < first_payload)
    return not_rows(first_payload, "no row can start");
  const uint64_t start = first_payload - fmt::kRowHeaderSize;
  // Up to the end of the record giving the last row when known; else a little past its
  // payload's start, and more as the walk needs it (a large last row, a TXN_END further on),
  // never more than a block's span past it.
  const uint64_t known_end = *end;
  const uint64_t cap = known_end ? known_end
                                 : std::min<uint64_t>(file_->size(), last_payload + RowIndex::kBlockBytes + fmt::kMaxRowLength);
  // A large transaction's TXN_END far past its rows: the rows are walked, then that record
  // alone is read (folding checked this gives the same rows: RowIndex::fold).
  const bool skip_to_end = known_end > last_payload + RowIndex::kFarEnd;
  uint64_t limit = known_end && !skip_to_end ? known_end : std::min<uint64_t>(cap, last_payload + kReadPast);
  std::string buf;
  auto read_to = [&](uint64_t to) {
    std::string more;
    Status s = file_->read(start + buf.size(), static_cast<size_t>(to - start - buf.size()), &more);
    if (!s.ok()) return Status(ErrorCode::kDamaged, s.message());  // (kCorrupt would say the whole table needs a repair)
    buf += more;
    return Status::Ok();
  };
  if (limit <= start) return not_rows(start, "no bytes");
  if (Status s = read_to(limit); !s.ok()) return s;
  std::map<uint64_t, std::vector<RowEntry>> pending;  // TXN_ROWs by transaction, until their TXN_END
  bool first_record = true;
  uint64_t start_txn = 0;  // the transaction of the TXN_ROW at first_payload (start_id)
  bool has_start_txn = false;
  auto give = [&](const RowEntry& e, uint64_t record_end) {
    if (e.id < first || e.id > last) return false;
    out->push_back(e);
    if (e.id != last) return false;
    *end = record_end;
    return true;
  };
  // A TXN_END: its committed rows get their ids; true if it gave the last one.
  auto ended = [&](const fmt::Record& r, uint64_t record_end) {
    auto it = pending.find(r.txn);
    if (it == pending.end()) return false;
    // The ids a commit gives in order (a row that asked for its own id, or an id floor, gives
    // others: folding then finds the entries differ, and keeps the block hot).
    RowId id = has_start_txn && r.txn == start_txn ? start_id : r.first_rowid;
    bool done = false;
    if (r.committed)
      for (RowEntry& e : it->second) {
        e.id = id++;
        if (!done) done = give(e, record_end);
      }
    pending.erase(it);
    return done;
  };
  size_t pos = 0;
  for (;;) {
    const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
    const size_t n = buf.size();
    const uint64_t at = start + pos;
    if (n - pos >= 4 && fmt::get_u32(p + pos) == fmt::kChunkMagic) {
      if (n - pos >= fmt::kChunkHeaderSize) {
        fmt::ChunkHeader h;
        if (!fmt::parse_chunk_header(p + pos, &h).empty()) return not_rows(at, "a damaged chunk header");
        pos += fmt::kChunkHeaderSize;
        continue;
      }
    } else if (n - pos >= fmt::kRowHeaderSize && (p[pos] == fmt::kCheckedRow || p[pos] == fmt::kRow) &&
               fmt::get_u64(p + pos + 1) == last && at + fmt::kRowHeaderSize == last_payload) {
      // The last row's ROW record: its header says all (its payload need not be read).
      RowEntry e;
      e.id = last;
      e.time_ms = fmt::get_u64(p + pos + 9);
      e.length = fmt::get_u32(p + pos + 17);
      e.offset = last_payload;
      give(e, last_payload + e.length + (p[pos] == fmt::kCheckedRow ? fmt::kRowChecksumSize : 0));
      return Status::Ok();
    } else if (n > pos) {
      fmt::RecordReader reader(std::string_view(buf.data() + pos, n - pos));
      fmt::Record r;
      if (reader.next(&r)) {
        const uint64_t record_end = at + reader.position();
        const bool is_first = first_record;
        first_record = false;
        if (is_first && start_id && r.type != fmt::kTxnRow) return not_rows(at, "no TXN_ROW");
        if (r.type == fmt::kRow) {
          RowEntry e;
          e.id = r.rowid;
          e.time_ms = r.time_ms;
          e.length = r.length;
          e.offset = at + r.payload_pos;
          if (give(e, record_end)) return Status::Ok();
        } else if (r.type == fmt::kTxnRow) {
          if (is_first && start_id) {
            start_txn = r.txn;
            has_start_txn = true;
          }
          RowEntry e;
          e.time_ms = r.time_ms;
          e.length = r.length;
          e.offset = at + r.payload_pos;
          e.txn_row = true;
          pending[r.txn].push_back(e);
        } else if (r.type == fmt::kTxnEnd) {
          if (ended(r, record_end)) return Status::Ok();
        }
        pos += reader.position();
        continue;
      }
    }
    if (skip_to_end && at + fmt::kRowHeaderSize > last_payload) {  // past the last row's record
      std::string rec;
      Status s = file_->read(known_end - fmt::kTxnEndSize, fmt::kTxnEndSize, &rec);
      if (!s.ok()) return Status(ErrorCode::kDamaged, s.message());
      fmt::RecordReader reader(rec);
      fmt::Record r;
      if (!reader.next(&r) || r.type != fmt::kTxnEnd || !ended(r, known_end))
        return not_rows(known_end - fmt::kTxnEndSize, "no TXN_END giving the last row");
      return Status::Ok();
    }
    // The bytes read end inside a record (or it is damaged): read on, if it may be.
    if ((known_end && !skip_to_end) || start + n >= cap) return not_rows(at, known_end ? "an unreadable record" : "no record giving the last row");
    if (Status s = read_to(std::min<uint64_t>(cap, start + n + std::max<uint64_t>(kReadPast, n))); !s.ok()) return s;
  }
}

}  // namespace q4m
