// QueueTableImpl: opening, SQL-scan reads, visibility, info.
#include "queue_table_impl.h"

#include <algorithm>
#include <chrono>

#include "block_reader.h"
#include "consumer_impl.h"
#include "index_snapshot.h"

namespace q4m {

bool TableState::read_cached(const RowLocation& r, std::string* out, Status* status) const {
  if (!file) return false;
  *status = Status::Ok();
  if (tail.read(file->id(), r.offset, r.length, out)) return true;
  if (!window.read(file->id(), r.offset, r.disk_length(), out)) return false;
  *status = check_row(r, file->path(), out->data());
  out->resize(r.length);
  return true;
}

Status TableState::read_here(const RowLocation& r, std::string* out) const {
  Status s;
  if (read_cached(r, out, &s)) return s;
  s = file->read(r.offset, r.disk_length(), out);
  if (s.ok()) s = check_row(r, file->path(), out->data());
  out->resize(r.length);
  return s;
}

void TableState::for_each_payload(const std::function<bool(const RowEntry&)>& want,
                                  const std::function<void(RowEntry&, std::string_view)>& fn,
                                  std::vector<RowId>* damaged) {
  const size_t end = index.end_pos();
  if (end == 0 || !file) return;
  // Rows are in file order: the last one ends the published bytes (the writer may be past it).
  const RowLocation last = locate(index.at(end - 1));
  BlockReader reader(*file, last.offset + last.disk_length());
  for (size_t pos = 0; pos < end; pos++) {
    RowEntry& e = index.at(pos);
    if (e.state == RowState::kRemoved || !want(e)) continue;
    const RowLocation r = locate(e);
    const unsigned char* bytes = nullptr;
    if (!reader.get(r.offset, r.disk_length(), &bytes).ok()) continue;
    const char* p = reinterpret_cast<const char*>(bytes);
    if (!check_row(r, file->path(), p).ok()) {
      damaged->push_back(e.id);
      continue;
    }
    fn(e, std::string_view(p, e.length));
  }
}
namespace {

// What a viewer may see (see the visibility rules in queue_table.h).
struct ViewerMode {
  bool owns_elsewhere = false;
  RowId owned_here = 0;  // the only row visible when non-zero (the lowest of a batch)
  const std::vector<RowId>* batch = nullptr;  // the rows visible, if it owns a batch here
};

// Only the viewer's own thread scans with it, so reading its batch is safe.
ViewerMode mode_of(const Consumer* viewer, const QueueTableImpl* table) {
  ViewerMode m;
  if (!viewer) return m;
  const Consumer::Impl& c = viewer->impl();
  const QueueTableImpl* t = c.owned_table.load(std::memory_order_acquire);
  if (!t) return m;
  if (t != table) {
    m.owns_elsewhere = true;
    return m;
  }
  m.owned_here = c.owned_rowid.load(std::memory_order_acquire);
  if (!c.batch_ids.empty()) m.batch = &c.batch_ids;
  return m;
}

// The owned row a scan after `after` reads next; 0 if none is left.
RowId next_owned(const ViewerMode& m, RowId after) {
  if (!m.batch) return m.owned_here > after ? m.owned_here : 0;
  auto it = std::upper_bound(m.batch->begin(), m.batch->end(), after);
  return it == m.batch->end() ? 0 : *it;
}

bool visible_in_scan(const RowEntry& e, const Consumer* viewer) {
  return queued(e.state) ||
         (e.state == RowState::kClaimedForDelete && e.owner == viewer && viewer);
}

// An older file is read as it is, but this build may append what its version lacks
// (version 1: kChunkUnsynced, which a version-1 reader would cut as a torn tail; version 2:
// RETURN records, which a version-2 reader would call corrupt). So its header (16 bytes,
// inside one sector) is rewritten and synced first, and an older build refuses the file by
// name.
Status upgrade_file_header(DataFile& file) {
  std::string header;
  Status s = file.read(0, fmt::kFileHeaderSize, &header);
  if (!s.ok()) return s;
  if (fmt::get_u32(header.data() + 8) == fmt::kFormatVersion) return Status::Ok();
  std::string why = fmt::check_file_header(header);
  if (!why.empty()) return Status(ErrorCode::kCorrupt, "file " + file.path() + ": " + why);
  return file.overwrite(0, fmt::file_header());
}

}  // namespace

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

Status QueueTableImpl::open(const std::string& path, std::shared_ptr<QueueTableImpl>* out) {
  std::shared_ptr<DataFile> file;
  Status s = DataFile::open(path, &file);
  if (!s.ok()) return s;
  // A leftover "<path>.tmp" is an unfinished compaction/truncate: the data file is intact.
  s = remove_file(path + ".tmp");
  if (!s.ok()) return s;
  RecoveredTable rec;
  const bool fast = load_index_snapshot(*file, &rec);
  // The snapshot must not outlive this open: the table may change from now on.
  const std::string snapshot = index_snapshot_path(path);
  if (file_exists(snapshot)) {
    s = remove_file(snapshot);
    if (s.ok()) s = sync_directory_of(path);
    if (!s.ok()) return s;
  }
  if (!fast) {
    rec = RecoveredTable();
    s = recover_table(*file, &rec);
    if (!s.ok()) return s;
  }
  s = upgrade_file_header(*file);
  if (!s.ok()) return s;
  std::unordered_map<RowId, uint64_t> due_ms = std::move(rec.due_ms);
  out->reset(new QueueTableImpl(path, std::move(file), std::move(rec)));
  (*out)->restore_delays(due_ms);  // needs the shared owner: a delay registers with the reaper
  return Status::Ok();
}

QueueTableImpl::QueueTableImpl(const std::string& path, std::shared_ptr<DataFile> file, RecoveredTable&& rec)
    : expirer_(std::make_unique<Consumer>()) {
  expirer_->set_sync_removals(false);
  set_path(path);
  file_bytes_ = file->size();
  {
    auto w = writer_.lock();
    w->file = file;
    w->next_rowid = rec.next_rowid;
    w->sources = std::move(rec.sources);
  }
  rows_ = rec.index.live();
  live_bytes_ = rec.index.live_bytes();
  next_rowid_ = rec.next_rowid;
  dropped_tail_bytes_ = rec.dropped_tail_bytes;
  counters_.rows_inserted.value = rec.rows_inserted;
  counters_.rows_removed.value = rec.rows_removed;
  auto st = state_.lock();
  st->index = std::move(rec.index);
  st->legacy = std::move(rec.legacy);
  st->install_file(std::move(file));
}

QueueTableImpl::~QueueTableImpl() = default;

void QueueTableImpl::set_path(const std::string& p) {
  auto paths = paths_.lock();
  paths->push_back(p);  // never erased: path() references stay valid for the table's life
  path_.store(&paths->back(), std::memory_order_release);
}

Status QueueTableImpl::dropped_status() const {
  return Status(ErrorCode::kDropped, "file " + path() + ": table was dropped");
}

Status QueueTableImpl::next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload,
                                    bool* found) {
  *found = false;
  ViewerMode m = mode_of(viewer, this);
  if (m.owns_elsewhere) return Status::Ok();
  RowId owned = m.owned_here ? next_owned(m, after) : 0;
  if (m.owned_here && !owned) return Status::Ok();  // the owner's scan is past its rows
  UncachedRead r;
  {
    auto st = state_.lock();
    const RowEntry* e = nullptr;
    if (m.owned_here) {
      // Skips rows of a batch that are gone (a DELETE, TRUNCATE or an expired lease).
      for (; owned; owned = next_owned(m, owned)) {
        e = st->index.find(owned);
        if (e && e->owner == viewer) break;
      }
      if (!owned) return Status::Ok();
    } else {
      size_t pos = st->index.lower_bound(after + 1), end = st->index.end_pos();
      while (pos < end && !visible_in_scan(st->index.at(pos), viewer)) pos++;
      if (pos == end) return Status::Ok();
      e = &st->index.at(pos);
    }
    *id = e->id;
    *found = true;
    if (!payload) return Status::Ok();
    if (std::optional<Status> s = read_locked(*st, *e, viewer, payload, &r)) return *s;
  }
  return read_uncached(r, payload, viewer);
}

std::optional<Status> QueueTableImpl::read_locked(TableState& st, const RowEntry& e, const Consumer* reader,
                                                  std::string* payload, UncachedRead* r) {
  const RowLocation row = st.locate(e);
  Status s;
  if (!st.read_cached(row, payload, &s)) {
    *r = st.uncached_read(row);
    return std::nullopt;
  }
  if (s.code() == ErrorCode::kDamaged) set_aside_damaged(st, row.id, reader);
  return s;
}

Status QueueTableImpl::read_uncached(const UncachedRead& r, std::string* payload, const Consumer* reader) {
  Status s;
  if (!r.block) {
    s = r.file->read(r.row.offset, r.row.disk_length(), payload);
    if (s.ok()) s = check_row(r.row, r.file->path(), payload->data());
  } else {
    std::string block;
    s = r.file->read(r.block->begin, static_cast<size_t>(r.block->end - r.block->begin), &block);
    if (!s.ok()) return s;
    const char* bytes = block.data() + (r.row.offset - r.block->begin);
    s = check_row(r.row, r.file->path(), bytes);
    payload->assign(bytes, r.row.length);
    auto st = state_.lock();  // the block is kept whatever this row's check said: each read checks its row
    if (st->file == r.file) st->window.fill(r.file->id(), r.block->begin, std::move(block));
  }
  payload->resize(r.row.length);
  if (s.code() == ErrorCode::kDamaged) {
    auto st = state_.lock();
    if (st->file == r.file) set_aside_damaged(*st, r.row.id, reader);  // (else compaction moved the row meanwhile)
  }
  return s;
}

Status QueueTableImpl::read_row(RowId id, std::string* payload, bool* found, const Consumer* reader) {
  *found = false;
  UncachedRead r;
  {
    auto st = state_.lock();
    RowEntry* e = st->index.find(id);
    if (!e) return Status::Ok();
    *found = true;
    if (std::optional<Status> s = read_locked(*st, *e, reader, payload, &r)) return *s;
  }
  return read_uncached(r, payload, reader);
}

Status QueueTableImpl::next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) {
  *found = false;
  UncachedRead r;
  {
    auto st = state_.lock();
    size_t pos = st->index.lower_bound(after + 1), end = st->index.end_pos();
    while (pos < end && st->index.at(pos).state == RowState::kRemoved) pos++;
    if (pos == end) return Status::Ok();
    const RowEntry& e = st->index.at(pos);
    *id = e.id;
    *found = true;
    if (history) {
      fmt::ReturnedRow kept;
      st->kept_across_restart(e, &kept);
      *history = RowHistory{e.time_ms, kept.deliveries, kept.due_ms};
    }
    if (!payload) return Status::Ok();
    if (std::optional<Status> s = read_locked(*st, e, nullptr, payload, &r)) return *s;
  }
  return read_uncached(r, payload, nullptr);
}

uint64_t QueueTableImpl::visible_count(const Consumer* viewer) {
  ViewerMode m = mode_of(viewer, this);
  if (m.owns_elsewhere) return 0;
  if (m.owned_here && !m.batch) return 1;
  if (m.batch) {  // the rows of its batch still held
    auto st = state_.lock();
    uint64_t n = 0;
    for (RowId id : *m.batch) {
      const RowEntry* e = st->index.find(id);
      n += e && e->owner == viewer;
    }
    return n;
  }
  uint64_t rows = rows_.load(std::memory_order_relaxed), owned = owned_.load(std::memory_order_relaxed);
  return rows > owned ? rows - owned : 0;
}

TableInfo QueueTableImpl::info() {
  TableInfo i;
  auto st = state_.lock();
  i.rows = st->index.live();
  i.owned_rows = owned_.load();
  i.delayed_rows = delayed_.load();
  i.dead_rows = st->dead_ids.size();
  i.message_groups = st->groups.group_count();
  i.max_rows = max_rows_.load(std::memory_order_relaxed);
  i.dedup_keys = dedup_keys_.load(std::memory_order_relaxed);
  i.waiters = st->waiters.size();
  i.file_bytes = file_bytes_.load();
  uint64_t live_record_bytes =
      fmt::kFileHeaderSize + st->index.live_bytes() + i.rows * (fmt::kRowHeaderSize + fmt::kRowChecksumSize);
  i.removed_bytes = i.file_bytes > live_record_bytes ? i.file_bytes - live_record_bytes : 0;
  if (const RowEntry* e = st->index.first_live()) {
    uint64_t now = now_ms();
    i.oldest_row_age_ms = now > e->time_ms ? now - e->time_ms : 1;
  }
  i.next_rowid = next_rowid_.load();
  i.dropped_tail_bytes = dropped_tail_bytes_;
  return i;
}

namespace {

// Milliseconds from `from` to `to` (LeaseClock ticks); 0 if `to` is not later.
uint64_t ms_between(LeaseClock::rep from, LeaseClock::rep to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(LeaseClock::duration(to - from)).count());
}

}  // namespace

std::vector<OwnedRowInfo> QueueTableImpl::owned_rows() {
  // Slices keep the state lock short however long the index: consumers go on meanwhile.
  constexpr size_t kSlice = 4096;
  std::vector<OwnedRowInfo> out;
  RowId after = 0;
  uint64_t held_seen = 0;
  for (bool more = true; more;) {
    auto st = state_.lock();
    const uint64_t wall = now_ms();
    const LeaseClock::rep now = LeaseClock::now().time_since_epoch().count();
    size_t pos = st->index.lower_bound(after + 1);
    const size_t end = std::min(st->index.end_pos(), pos + kSlice);
    for (; pos < end; pos++) {
      const RowEntry& e = st->index.at(pos);
      after = e.id;
      if (!held_by_connection(e.state)) continue;
      held_seen++;
      if (e.state != RowState::kOwned || !e.owner) continue;
      const Consumer::Impl& c = e.owner->impl();  // alive: it gives its rows back before it goes
      OwnedRowInfo r;
      r.id = e.id;
      r.connection_id = c.connection_id;
      r.deliveries = e.deliveries;
      r.row_age_ms = wall > e.time_ms ? wall - e.time_ms : 0;
      const LeaseClock::rep since = c.owned_since.load(std::memory_order_relaxed);
      r.owned_ms = since > 0 ? ms_between(since, now) : 0;
      if (c.lease_token.load() != 0) r.lease_left_ms = static_cast<int64_t>(ms_between(now, c.lease_at.load()));
      out.push_back(r);
    }
    more = pos < st->index.end_pos() && held_seen < owned_.load();
  }
  return out;
}

}  // namespace q4m
