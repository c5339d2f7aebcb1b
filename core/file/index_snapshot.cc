#include "core/file/index_snapshot.h"

#include "core/file/row_source.h"

#include <sys/stat.h>

#include <cstring>

#include "core/util/crc32c.h"
#include "core/file/format.h"

namespace q4m {
namespace {

constexpr char kMagic[8] = {'Q', '4', 'M', 'I', 'N', 'D', 'E', 'X'};
// 3 added the known checksums (rows with none on disk); 1 and 2 are not used (see index_snapshot.h).
constexpr uint32_t kVersion = 3;
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
  fmt::put_u64(&b, src.index->live());
  b.reserve(b.size() + src.index->live() * kRowBytes + 4);
  const RowIndex& index = *src.index;
  for (size_t p = 0; p < index.end_pos(); p++) {
    const RowEntry& e = index.at(p);
    if (e.state == RowState::kRemoved) continue;
    fmt::put_u64(&b, e.id);
    fmt::put_u64(&b, e.offset);
    fmt::put_u32(&b, e.length);
    fmt::put_u64(&b, e.time_ms);
  }
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
  if (version != kVersion) return false;
  r.u32();
  out->index.set_source(FileRowSource::borrowing(file));
  FileIdentity want, have;
  want.size = r.u64();
  want.inode = r.u64();
  want.tail_crc = r.u32();
  r.u32();
  if (!identity_of(file, &have) || have.size != want.size || have.inode != want.inode ||
      have.tail_crc != want.tail_crc)
    return false;
  RecoveredTable t;
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
  RowId last = 0;
  for (uint64_t i = 0; i < n_rows; i++) {
    RowEntry e;
    e.id = r.u64();
    e.offset = r.u64();
    e.length = r.u32();
    e.time_ms = r.u64();
    if (e.id <= last || e.id >= t.next_rowid || e.offset + e.length > have.size) return false;
    last = e.id;
    t.index.append(e);
  }
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
