// Maintenance of one table's file: truncate, drop, rename, close (compaction.cc: compaction).
// Each takes the writer turn, so no commit is in flight while the file is replaced.
#include <algorithm>

#include "core/file/index_snapshot.h"
#include "core/file/replacement_file.h"
#include "core/table/snapshots.h"
#include "core/table/table.h"

namespace q4m {

Status Table::copy_data(const std::string& dest) {
  CommitPipeline::Turn turn(pipeline_);  // no commit in flight, no file replaced
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  std::shared_ptr<DataFile> out;
  Status s = DataFile::create(dest, &out);
  constexpr size_t kPiece = 1 << 20;
  std::string piece;
  for (uint64_t at = 0, end = w->file->size(); s.ok() && at < end; at += piece.size()) {
    s = w->file->read(at, static_cast<size_t>(std::min<uint64_t>(kPiece, end - at)), &piece);
    if (s.ok() && piece.empty()) break;
    if (s.ok()) s = out->append(piece);
  }
  return s.ok() ? out->sync(SyncMode::kFdatasync) : s;
}

Status Table::truncate() {
  CommitPipeline::Turn turn(pipeline_);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  if (!w->broken.ok()) return w->broken;
  if (Status s = refuse_with_prepared(*state_.lock(), "TRUNCATE"); !s.ok()) return s;
  const uint64_t live = state_.lock()->index.live();  // frozen: no commit while we hold the turn
  Status s = invalidate_snapshot(*w);
  if (!s.ok()) return s;
  ReplacementFile out;
  s = out.create(path());
  if (!s.ok()) return s;
  out.add_meta(meta_now(*w, live));  // ids keep growing; relay dedup state is kept
  w->policies.each([&](auto& p) { p.keep(out, true); });  // relay state is kept; dedup keys are not
  subscriptions_.keep(out, [](RowId) { return false; });  // subscriptions are kept, with no row
  std::shared_ptr<DataFile> fresh;
  s = out.install(&fresh);
  if (!fresh) return s;
  if (!s.ok()) w->broken = s;  // renamed, but not durably: stop appending
  {
    auto st = state_.lock();  // every row vanishes, owned ones too; waiters keep waiting
    forget_rows(*st);  // the owners' end() finds their rows gone, as without a lease
    st->install_file(fresh);
  }
  subscriptions_.truncated();
  counters_.rows_removed.add(live);
  w->policies.each([](auto& p) { p.truncated(); });
  counters_.dedup_keys.set(0);
  w->file = fresh;
  w->tail_flagged = false;
  w->generation++;  // a concurrent compaction's copy is void
  file_bytes_.store(fresh->size());
  return s;
}

void Table::forget_rows(State& st) {
  if (Snapshots::any()) {  // an open snapshot may still read them (snapshot_journal.h)
    const uint64_t ticket = Snapshots::ticket();
    for (size_t pos = 0; pos < st.index.end_pos(); pos++) {
      const RowEntry& e = st.index.at(pos);
      if (e.state != RowState::kRemoved) st.journal.removed(ticket, SnapshotRow{st.locate(e), st.file});
    }
  }
  st.index.clear();
  st.claims.clear();
  st.cursors.clear();
  st.first_free_hint = 0;
  st.known_sums.clear();
  st.policies.each([](auto& p) { p.forget(); });
  for (auto& [id, p] : st.prepared) pending_rows_.fetch_sub(p.rows.size());
  st.prepared.clear();  // a part's rows vanish with the others; its end finds nothing to do
  st.ended.clear();     // and the history with them (TRUNCATE writes a new file)
  note_history_size(st);
  // Every count and mirror of the index, in one place.
  st.delayed = st.dead = 0;
  rows_.store(0);
  held_.store(0);
  live_bytes_.store(0);
}

void Table::mark_dropped(bool rows_moved) {
  give_rows_back();  // the ALTER that built this table failed: the table it took over takes the rows back
  std::shared_ptr<Table> next;
  {
    CommitPipeline::Turn turn(pipeline_);
    auto w = writer_.lock();
    dropped_.store(true);
    const std::string message = "file " + path() + ": table was dropped while waiting";
    auto st = state_.lock();
    st->dropped = true;
    for (Waiter& wt : st->waiters) wt.request.receiver->table_dropped(message);
    st->waiters.clear();
    subscriptions_.table_dropped(message);
    next = st->successor;  // stays: holders still calling this table are passed on there
    if (rows_moved && !next) {  // the rows left the engine (ALTER ... ENGINE=): no end may succeed
      for (size_t p = 0; p < st->index.end_pos(); p++) {
        const RowEntry& e = st->index.at(p);
        if (e.state == RowState::kOwned && e.holder) e.holder->mark_rows_moved();
      }
    }
    forget_rows(*st);  // owned rows vanish: their owners' end()/abort() just leave owner mode
    st->file.reset();
    w->file.reset();
    w->unwritten.clear();
    waiters_.store(0);
  }
  if (next) next->predecessor_dropped(this);  // the ALTER went through
}

Status Table::rename_to(const std::string& to) {
  CommitPipeline::Turn turn(pipeline_);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  Status s = w->file->release_preallocation();  // the object opened below starts at the file's end
  if (s.ok()) s = rename_file(path(), to);
  if (!s.ok()) return s;
  std::shared_ptr<DataFile> fresh;
  if (DataFile::open(to, &fresh).ok()) {  // same inode; only so messages name the new path
    w->file = fresh;
    state_.lock()->install_file(fresh);
  }
  set_path(to);
  w->generation++;  // a concurrent compaction writes "<old path>.tmp": void
  return Status::Ok();
}

// After close()'s sync: a last chunk flagged `unsynced` (sync mode none, queue_binlog_redo's
// prepares, a chunk after an unsynced commit record) would leave every chunk since the last
// unflagged one looking like a tail a power cut may have lost, so a damaged one among them
// would be cut with everything after it, not refused, when the next open walks the file
// (no index snapshot: removed, or not written). The synced mark after it says they are
// durable (docs/recovery.md). False if it could not be written and synced.
bool Table::mark_synced(Writer& w) {
  if (!w.tail_flagged) return true;
  if (!w.file->append(fmt::synced_mark_chunk()).ok() || !w.file->sync(SyncMode::kFdatasync).ok()) return false;
  w.tail_flagged = false;
  return true;
}

// Closing leaves an index snapshot so the next open need not read the whole file. The data
// file is synced first, whatever the sync mode: chunks written without a sync (sync mode
// none, queue_sync_removals=OFF) could otherwise lose sectors to a power cut that the
// snapshot's size and tail checks do not see, and a later full recovery would find the hole.
void Table::close() {
  CommitPipeline::Turn turn(pipeline_);
  auto w = writer_.lock();
  if (dropped_.load() || !w->broken.ok() || !w->file) return;
  auto st = state_.lock();
  std::vector<fmt::ReturnedRow> returned;
  // Hot entries only: a cold block's rows are plain (nothing to keep), and reading every
  // block back here would write them all into the snapshot as hot rows (28 B a row on disk,
  // and a next open that folds them all again).
  st->index.for_each_run(
      [&](const RowEntry& e) {
        fmt::ReturnedRow r;
        if (kept_across_restart(*st, e, &r)) returned.push_back(r);
      },
      [](const RowIndex::ColdRun&) {});
  SnapshotSource src{w->ids.next, counters_.rows_inserted.get(), counters_.rows_removed.get(),
                     &w->policies.get<Relay>().sources(), &st->index, &returned, &st->known_sums};
  // The snapshot records the file size: drop the preallocation first (or the next open recovers).
  // A snapshot holds no prepared part, no id floor and no history: with one, the next open
  // reads the file (TXN_* records, ID_FLOOR, HISTORY; a floor matters only until ids reach it).
  w->snapshot_written = w->file->release_preallocation().ok() && w->file->sync(SyncMode::kFdatasync).ok() &&
                        mark_synced(*w) &&
                        st->prepared.empty() && st->ended.empty() && !subscriptions_.any() && w->ids.floor <= w->ids.next && write_index_snapshot(*w->file, src).ok();
  // A later acquire() opens a new object for this file; two writers must never append
  // to one file, so this one stops writing (reads still work).
  w->broken = Status(ErrorCode::kIo, "file " + path() + ": table was closed");
}

Status Table::invalidate_snapshot(Writer& w) {
  if (!w.snapshot_written) return Status::Ok();
  Status s = remove_file(index_snapshot_path(path()));
  if (s.ok()) w.snapshot_written = false;
  return s;
}

}  // namespace q4m
