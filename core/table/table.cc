// Table: opening, configuring, figures, and the timer pass.
#include "core/table/table.h"

#include <chrono>

#include <algorithm>

#include "core/file/block_reader.h"
#include "core/file/index_snapshot.h"

namespace q4m {

namespace {

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

bool Table::State::read_cached(const RowLocation& r, std::string* out, Status* status) const {
  if (!file) return false;
  *status = Status::Ok();
  if (tail.read(file->id(), r.offset, r.length, out)) return true;  // bytes this process wrote
  if (!window.read(file->id(), r.offset, r.disk_length(), out)) return false;
  *status = check_row(r, file->path(), out->data());
  out->resize(r.length);
  return true;
}

Status Table::State::read_here(const RowLocation& r, std::string* out) const {
  Status s;
  if (read_cached(r, out, &s)) return s;
  s = file->read(r.offset, r.disk_length(), out);
  if (s.ok()) s = check_row(r, file->path(), out->data());
  out->resize(r.length);
  return s;
}

UncachedRead Table::State::uncached_read(const RowLocation& row) const {
  UncachedRead r{file, row, std::nullopt};
  ReadAheadWindow::Plan plan;
  if (file && tail.file_id() == file->id() && ReadAheadWindow::plan(row.offset, row.disk_length(), tail.begin(), &plan))
    r.block = plan;
  return r;
}

void Table::State::for_each_payload(const std::function<bool(const RowEntry&)>& want,
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

Status Table::open(const std::string& path, std::shared_ptr<Table>* out) {
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
  std::shared_ptr<Table> table(new Table(path, std::move(file), rec));
  table->restore(rec);  // needs the shared owner: a delay registers with the reaper
  *out = std::move(table);
  return Status::Ok();
}

Table::Table(const std::string& path, std::shared_ptr<DataFile> file, RecoveredTable& rec) {
  set_path(path);
  *options_.lock() = std::make_shared<const TableOptions>();
  file_bytes_ = file->size();
  {
    auto w = writer_.lock();
    w->file = file;
    w->ids = IdSequence{rec.next_rowid, rec.id_floor};
    // Numbers of prepared parts keep increasing across server runs (also when the open read an
    // index snapshot, which keeps none): a part's redo names its number (redo.h).
    w->next_txn = std::max<uint64_t>(
        rec.next_txn, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count()));
    w->policies.each([&](auto& p) { p.opened(rec); });
  }
  rows_ = rec.index.live();
  live_bytes_ = rec.index.live_bytes();
  next_rowid_ = rec.next_rowid;
  id_floor_ = rec.id_floor;
  torn_tail_bytes_ = rec.dropped_tail_bytes;
  counters_.rows_inserted.value = rec.rows_inserted;
  counters_.rows_removed.value = rec.rows_removed;
  auto st = state_.lock();
  st->index = std::move(rec.index);
  st->known_sums = std::move(rec.known_sums);
  st->install_file(std::move(file));
}

void Table::restore(RecoveredTable& rec) {
  auto st = state_.lock();
  RowContext ctx = context(*st);
  restore_prepared(*st, rec, ctx);
  restore_history(*st, rec);
  st->policies.each([&](auto& p) { p.opened(rec, ctx); });
  finish(*st, ctx);
  st.unique_lock().unlock();
  if (!rec.subscriptions.empty()) {
    subscriptions_.restore(rec.subscriptions, rec.next_subscription);
    subscriptions_.restore_parts(rec.prepared);  // their ends in parts still prepared
  }
}

Table::~Table() { global_stats().memory_bytes.add(0 - memory_bytes_.load()); }

void Table::set_path(const std::string& p) {
  auto paths = paths_.lock();
  paths->push_back(p);  // never erased: path() references stay valid for the table's life
  path_.store(&paths->back(), std::memory_order_release);
}

Status Table::dropped_status() const {
  return Status(ErrorCode::kDropped, "file " + path() + ": table was dropped");
}

RowContext Table::context(State& st) { return RowContext(st.index, held_.load(std::memory_order_relaxed), &counters_); }

void Table::watch(SteadyClock::time_point at) {
  if (at == SteadyClock::time_point::max()) return;
  if (!timed_.exchange(true)) Reaper::instance().watch(weak_from_this());
  Reaper::instance().deadline_added(at);
}

void Table::finish(State& st, RowContext& ctx, std::vector<fmt::ReturnedRow>* returned) {
  for (size_t i = 0; i < ctx.asks.size(); i++) {  // a move's hooks may ask for more
    const RowContext::Request a = ctx.asks[i];
    RowEntry* e = st.index.find(a.id);
    if (!e) continue;
    switch (a.ask) {
      case RowContext::Ask::kReturn:
        if (returned) returned->push_back(fmt::ReturnedRow{e->id, e->deliveries, 0});
        requeue(st, *e, std::chrono::milliseconds(0), ctx);
        break;
      case RowContext::Ask::kRequeue:
        requeue(st, *e, std::chrono::milliseconds(0), ctx);
        break;
      case RowContext::Ask::kMove:
        move(st, *e, a.move, ctx);
        if (e->state == RowState::kFree) offer(st, *e, std::string_view(), ctx);
        break;
    }
  }
  ctx.asks.clear();
  release(st, ctx);
  watch(ctx.wake);
}

void Table::configure(std::shared_ptr<const TableOptions> options) {
  if (!options || configured_.load(std::memory_order_acquire) == options.get()) return;
  {
    // No batch is built while the writer policies change (dedup reads its keys).
    CommitPipeline::Turn turn(pipeline_);
    auto w = writer_.lock();
    WriterContext ctx;
    ctx.now_ms = now_ms();
    ctx.rows = rows_.load();
    ctx.counters = &counters_;
    ctx.file = dropped_.load() ? nullptr : w->file.get();
    ctx.broken = &w->broken;
    w->policies.each([&](auto& p) { p.configure(*options, ctx); });
  }
  {
    auto st = state_.lock();
    if (!st->dropped && st->file) {
      RowContext ctx = context(*st);
      std::vector<RowId> damaged;  // rows a policy read that failed their checksum
      ctx.for_each_payload = [&st, &damaged](const std::function<bool(const RowEntry&)>& want,
                                             const std::function<void(RowEntry&, std::string_view)>& fn) {
        st->for_each_payload(want, fn, &damaged);
      };
      // One policy at a time: each sees the moves the ones before it asked for.
      st->policies.each([&](auto& p) {
        p.configure(*options, ctx);
        finish(*st, ctx);
        set_aside(*st, damaged);  // (a MESSAGE_GROUP_COLUMN's: in no group, their key is unknown)
        damaged.clear();
      });
    }
    st->history_ms = static_cast<uint64_t>(options->history_retention.count());
    history_ms_.store(st->history_ms, std::memory_order_relaxed);
    expire_history(*st, now_ms());  // off: forgets every history row and mark
    *options_.lock() = options;
    configured_.store(options.get(), std::memory_order_release);
  }
  remove_policy_claims();
}

std::shared_ptr<const TableOptions> Table::options() const {
  return *options_.lock();
}

SteadyClock::time_point Table::due(SteadyClock::time_point) {
  // A moved table's rows stand still: their leases, delays and TTL run in the table that
  // took them over (takeover.cc); a give-back asks for a pass again.
  if (moved_to()) return SteadyClock::time_point::max();
  std::vector<fmt::ReturnedRow> returned;
  SteadyClock::time_point next = SteadyClock::time_point::max();
  {
    auto st = state_.lock();
    RowContext ctx = context(*st);
    st->policies.each([&](auto& p) {
      next = std::min(next, p.due(ctx));
      finish(*st, ctx, &returned);
    });
    next = std::min(next, ctx.wake);
  }
  record_returns(returned);  // after the state lock: a commit takes the writer's first
  remove_policy_claims();
  return std::min(next, subscriptions_.due(SteadyClock::now()));
}

void Table::remove_policy_claims() {
  std::vector<const Holder*> claimers;
  const Holder* expiry = nullptr;
  {
    auto st = state_.lock();
    st->policies.each([&](const auto& p) {
      if (const Holder* h = p.claimer(); h && st->claims.count(h)) claimers.push_back(h);
    });
    expiry = st->policies.get<Expiry>().claimer();
  }
  ExpiryLog* log = ExpiryLog::get();
  for (const Holder* h : claimers) {
    if (h == expiry && log && !log->expires()) {  // a replica now: its primary's log removes them
      release_claims(h);
      continue;
    }
    if (h == expiry && log && log->logged()) {  // a logged transaction removes them
      log->claimed(path());
      continue;
    }
    size_t removed = 0;
    // A failed commit puts the rows back (requeue), where the policy claims them again and
    // asks for another pass.
    if (!remove_claimed_rows(h, &removed).ok() || removed == 0) continue;
    auto st = state_.lock();
    st->policies.each([&](auto& p) {
      if (p.claimer() == h) p.claims_removed(removed, counters_);
    });
  }
}

TableStats Table::info() {
  TableStats i;
  counters_.copy_to(&i);
  auto st = state_.lock();
  i.rows = st->index.live();
  i.owned_rows = held_.load();
  i.delayed_rows = st->delayed;
  i.dead_rows = st->dead;
  i.waiters = st->waiters.size();
  i.file_bytes = file_bytes_.load();
  uint64_t live_record_bytes =
      fmt::kFileHeaderSize + st->index.live_bytes() + i.rows * (fmt::kRowHeaderSize + fmt::kRowChecksumSize);
  live_record_bytes += st->ended.file_bytes();  // history rows are not compaction's to reclaim
  i.removed_bytes = i.file_bytes > live_record_bytes ? i.file_bytes - live_record_bytes : 0;
  expire_history(*st, now_ms());
  i.history_rows = st->ended.size();
  i.history_bytes = st->ended.bytes();
  const uint64_t now = now_ms();
  if (const RowEntry* e = st->index.first_live()) i.oldest_age_ms = now > e->time_ms ? now - e->time_ms : 1;
  if (const RowEntry* e = next_plain(*st)) i.oldest_ready_age_ms = now > e->time_ms ? now - e->time_ms : 1;
  i.next_rowid = ids().upcoming();
  i.torn_tail_bytes = torn_tail_bytes_;
  i.memory_bytes = st->index.memory_bytes() + st->known_sums.memory_bytes();
  st->policies.each([&](const auto& p) { p.report(i); });
  return i;
}

}  // namespace q4m
