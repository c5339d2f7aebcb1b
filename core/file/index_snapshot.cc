#include "core/file/index_snapshot.h"

#include "core/file/row_source.h"

#include <sys/stat.h>

#include <cstring>

#include "core/util/crc32c.h"
#include "core/file/format.h"

namespace q4m {
namespace {

constexpr char kMagic[8] = {'Q', '4', 'M', 'I', 'N', 'D', 'E', 'X'};
// 3 added the known checksums (rows with none on disk); 1 and 2 are not used (see index_snapshot.h);
// 4 the index's cold blocks; 5 rows committed in two phases (a row's length has kTxnRowBit: its
// record is a TXN_ROW) and where a cold block's records end (still reads 3 and 4).
constexpr uint32_t kVersion = 5;
constexpr uint32_t kTxnRowBit = 1u << 31;  // above any row's length (fmt::kMaxRowLength)
static_assert(fmt::kMaxRowLength < kTxnRowBit, "a row's length leaves the top bit free");
constexpr uint64_t kTailBytes = 64 * 1024;
constexpr size_t kRowBytes = 8 + 8 + 4 + 8;

struct FileIdentity {
  uint64_t size = 0, inode = 0;
  uint32_t tail_crc = 0;
};

bool identity_of(const DataFile& f, FileIdentity* id) {
  struct stat st;
  if (::stat(f.path().c_str(), &st) != 0) return false;
  id->size = f.size();
  id->inode = static_cast<uint64_t>(st.st_ino);
  uint64_t n = id->size < kTailBytes ? id->size : kTailBytes;
  std::string tail;
  if (!f.read(id->size - n, static_cast<size_t>(n), &tail).ok()) return false;
  id->tail_crc = crc32c(tail);
  return true;
}

// Bounds-checked little-endian reader.
struct Reader {
  const std::string& b;
  size_t pos = 0;
  bool ok = true;
  uint64_t u64() {
    if (b.size() - pos < 8) { ok = false; return 0; }
    pos += 8;
    return fmt::get_u64(b.data() + pos - 8);
  }
  uint32_t u32() {
    if (b.size() - pos < 4) { ok = false; return 0; }
    pos += 4;
    return fmt::get_u32(b.data() + pos - 4);
  }
};

}  // namespace

std::string index_snapshot_path(const std::string& data_path) { return data_path + ".idx"; }

Status write_index_snapshot(const DataFile& file, const SnapshotSource& src) {
  FileIdentity id;
  if (!identity_of(file, &id)) return Status(ErrorCode::kIo, "file " + file.path() + ": cannot identify for snapshot");
  std::string b(kMagic, sizeof(kMagic));
  fmt::put_u32(&b, kVersion);
  fmt::put_u32(&b, 0);
  fmt::put_u64(&b, id.size);
  fmt::put_u64(&b, id.inode);
  fmt::put_u32(&b, id.tail_crc);
  fmt::put_u32(&b, 0);
  fmt::put_u64(&b, src.next_rowid);
  fmt::put_u64(&b, src.rows_inserted);
  fmt::put_u64(&b, src.rows_removed);
  fmt::put_u32(&b, static_cast<uint32_t>(src.sources->size()));
  for (const auto& s : *src.sources) {
    fmt::put_u32(&b, s.first);
    fmt::put_u64(&b, s.second);
  }
  const RowIndex& index = *src.index;
  // Hot rows one by one, cold blocks as they are (no block is read back for this).
  const size_t n_rows_at = b.size();
  fmt::put_u64(&b, 0);
  uint64_t n_rows = 0;
  std::string cold;
  uint64_t n_cold = 0;
  index.for_each_run(
      [&](const RowEntry& e) {
        fmt::put_u64(&b, e.id);
        fmt::put_u64(&b, e.offset);
        fmt::put_u32(&b, e.length | (e.txn_row ? kTxnRowBit : 0));
        fmt::put_u64(&b, e.time_ms);
        n_rows++;
      },
      [&](const RowIndex::ColdRun& c) {
        fmt::put_u64(&cold, c.first_payload);
        fmt::put_u64(&cold, c.last_payload);
        fmt::put_u64(&cold, c.first);
        fmt::put_u64(&cold, c.last);
        fmt::put_u32(&cold, c.slots);
        fmt::put_u32(&cold, c.dense ? 1 : 0);
        fmt::put_u32(&cold, c.live);
        fmt::put_u64(&cold, c.live_bytes);
        fmt::put_u64(&cold, c.end);
        fmt::put_u64(&cold, c.start_id);
        for (uint64_t w : c.live_bits) fmt::put_u64(&cold, w);
        n_cold++;
      });
  for (int i = 0; i < 8; i++) b[n_rows_at + i] = static_cast<char>(n_rows >> (8 * i));
  fmt::put_u64(&b, n_cold);
  b += cold;
  fmt::put_u64(&b, src.returned->size());
  for (const fmt::ReturnedRow& r : *src.returned) fmt::put_returned_row(&b, r);
  std::vector<size_t> live_known;  // entries of src.known_sums whose rows were not removed since the open
  for (size_t i = 0; i < src.known_sums->size(); i++) {
    const size_t p = index.lower_bound(src.known_sums->id_at(i));
    if (p < index.end_pos() && index.at(p).id == src.known_sums->id_at(i) && index.at(p).state != RowState::kRemoved)
      live_known.push_back(i);
  }
  fmt::put_u64(&b, live_known.size());
  for (size_t i : live_known) {
    fmt::put_u64(&b, src.known_sums->id_at(i));
    fmt::put_u32(&b, src.known_sums->checksum_at(i));
  }
  fmt::put_u32(&b, crc32c(b));
  return write_file_atomically(index_snapshot_path(file.path()), b, false);
}

bool load_index_snapshot(const DataFile& file, RecoveredTable* out) {
  std::shared_ptr<DataFile> snap;
  if (!DataFile::open(index_snapshot_path(file.path()), &snap).ok()) return false;
  std::string b;
  if (snap->size() < 64 || !snap->read(0, static_cast<size_t>(snap->size()), &b).ok()) return false;
  if (std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0) return false;
  if (crc32c(b.data(), b.size() - 4) != fmt::get_u32(b.data() + b.size() - 4)) return false;
  Reader r{b};
  r.pos = sizeof(kMagic);
  const uint32_t version = r.u32();
  if (version != kVersion && version != 4 && version != 3) return false;
  r.u32();
  FileIdentity want, have;
  want.size = r.u64();
  want.inode = r.u64();
  want.tail_crc = r.u32();
  r.u32();
  if (!identity_of(file, &have) || have.size != want.size || have.inode != want.inode ||
      have.tail_crc != want.tail_crc)
    return false;
  RecoveredTable t;
  t.index.set_source(FileRowSource::borrowing(file));  // the Table gives it its own (install_file)
  t.next_rowid = r.u64();
  t.rows_inserted = r.u64();
  t.rows_removed = r.u64();
  uint32_t n_sources = r.u32();
  for (uint32_t i = 0; r.ok && i < n_sources; i++) {
    uint32_t src = r.u32();
    t.sources[src] = r.u64();
  }
  uint64_t n_rows = r.u64();
  if (!r.ok || n_rows > (b.size() - r.pos) / kRowBytes) return false;
  const size_t rows_at = r.pos;
  r.pos += n_rows * kRowBytes;
  // Version 4: the cold blocks, merged with the rows in id order.
  uint64_t n_cold = version >= 4 ? r.u64() : 0;
  if (!r.ok || n_cold > (b.size() - r.pos) / 52) return false;  // (a version 4 block's size)
  Reader rows{b, rows_at};
  RowId last = 0;
  uint64_t row_i = 0;
  RowEntry e;
  auto next_row = [&] {
    if (row_i++ == n_rows) return false;
    e = RowEntry();
    e.id = rows.u64();
    e.offset = rows.u64();
    e.length = rows.u32();
    if (version >= 5) {
      e.txn_row = (e.length & kTxnRowBit) != 0;
      e.length &= ~kTxnRowBit;
    }
    e.time_ms = rows.u64();
    return true;
  };
  bool have_row = next_row();
  for (uint64_t i = 0; i <= n_cold; i++) {
    RowIndex::ColdRun c;
    if (i < n_cold) {
      c.first_payload = r.u64();
      c.last_payload = r.u64();
      c.first = r.u64();
      c.last = r.u64();
      c.slots = r.u32();
      c.dense = r.u32() != 0;
      c.live = r.u32();
      c.live_bytes = r.u64();
      if (version >= 5) {
        c.end = r.u64();
        c.start_id = r.u64();
      }
      if (!r.ok || c.slots == 0 || (c.slots + 63) / 64 > (b.size() - r.pos) / 8) return false;
      c.live_bits.resize((c.slots + 63) / 64);
      for (uint64_t& w : c.live_bits) w = r.u64();
      if (c.last >= t.next_rowid || c.last_payload >= have.size || c.end > have.size) return false;
    }
    for (; have_row && (i == n_cold || e.id < c.first); have_row = next_row()) {
      if (e.id <= last || e.id >= t.next_rowid || e.offset + e.length > have.size) return false;
      last = e.id;
      t.index.append(e);
    }
    if (i < n_cold) {
      const RowId cold_last = c.last;
      if (!t.index.append_cold(std::move(c))) return false;  // also checks its ids follow `last`
      last = cold_last;
    }
  }
  r.ok = r.ok && rows.ok;
  uint64_t n_returned = r.u64();
  if (!r.ok || n_returned > (b.size() - r.pos) / fmt::kReturnEntrySize) return false;
  for (uint64_t i = 0; i < n_returned; i++, r.pos += fmt::kReturnEntrySize) {
    const fmt::ReturnedRow ret = fmt::get_returned_row(b.data() + r.pos);  // in bounds: checked above
    if (!t.index.find(ret.id)) return false;  // describes no row of the snapshot
    apply_returned_row(ret, &t);
  }
  uint64_t n_known = r.u64();
  if (!r.ok || n_known > (b.size() - r.pos) / (8 + 4)) return false;
  last = 0;
  for (uint64_t i = 0; i < n_known; i++) {
    const RowId id = r.u64();
    const uint32_t checksum = r.u32();
    if (id <= last || !t.index.find(id)) return false;  // out of order, or no row of the snapshot
    last = id;
    t.known_sums.add(id, checksum);
  }
  if (!r.ok || r.pos != b.size() - 4) return false;
  *out = std::move(t);
  return true;
}

}  // namespace q4m
