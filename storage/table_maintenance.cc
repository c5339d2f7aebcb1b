// Maintenance of one table's file: truncate, drop, rename, close (compaction.cc: compaction).
// Each takes the writer turn, so no commit is in flight while the file is replaced.
#include "consumer_impl.h"
#include "queue_table_impl.h"
#include "index_snapshot.h"
#include "replacement_file.h"

namespace q4m {

Status QueueTableImpl::truncate() {
  WriterTurn turn(*this);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  if (!w->broken.ok()) return w->broken;
  const uint64_t live = state_.lock()->index.live();  // frozen: no commit while we hold the turn
  Status s = invalidate_snapshot(*w);
  if (!s.ok()) return s;
  ReplacementFile out;
  s = out.create(path());
  if (!s.ok()) return s;
  fmt::Meta meta;  // ids keep growing; relay dedup state is kept
  meta.next_rowid = w->next_rowid;
  meta.rows_inserted = counters_.rows_inserted.get();
  meta.rows_removed = counters_.rows_removed.get() + live;
  out.add_meta(meta);
  for (const auto& src : w->sources) out.add_srcid(src.first, src.second);  // relay state is kept
  std::shared_ptr<DataFile> fresh;
  s = out.install(&fresh);
  if (!fresh) return s;
  if (!s.ok()) w->broken = s;  // renamed, but not durably: stop appending
  {
    auto st = state_.lock();  // every row vanishes, owned ones too; waiters keep waiting
    forget_rows(*st);  // the owners' end() finds their rows gone, as without a lease
    st->install_file(fresh);
  }
  counters_.rows_removed.add(live);
  w->dedup.clear();  // the new file holds no key: TRUNCATE forgets them too
  dedup_keys_.store(0, std::memory_order_relaxed);
  w->file = fresh;
  w->generation++;  // a concurrent compaction's copy is void
  file_bytes_.store(fresh->size());
  return s;
}

void QueueTableImpl::forget_rows(TableState& st) {
  st.index.clear();
  st.claims.clear();
  st.cursors.clear();
  st.leases.clear();
  st.clear_delays();
  st.first_free_hint = 0;
  st.groups.clear();  // the column stays: new rows join groups again
  st.dead_ids.clear();  // DEAD_ROWS counts these: TRUNCATE once left a separate counter behind
  st.legacy.clear();
  // Every mirror of the index, in one place.
  rows_.store(0);
  owned_.store(0);
  delayed_.store(0);
  live_bytes_.store(0);
}

void QueueTableImpl::mark_dropped() {
  WriterTurn turn(*this);
  auto w = writer_.lock();
  dropped_.store(true);
  const std::string message = "file " + path() + ": table was dropped while waiting";
  auto st = state_.lock();
  st->dropped = true;
  for (Waiter& wt : st->waiters) wt.consumer->table_dropped(message);
  st->waiters.clear();
  forget_rows(*st);  // owned rows vanish: their owners' end()/abort() just leave owner mode
  st->file.reset();
  w->file.reset();
  waiters_.store(0);
}

Status QueueTableImpl::rename_to(const std::string& to) {
  WriterTurn turn(*this);
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

// Closing leaves an index snapshot so the next open need not read the whole file. The data
// file is synced first, whatever the sync mode: chunks written without a sync (sync mode
// none, queue_sync_removals=OFF) could otherwise lose sectors to a power cut that the
// snapshot's size and tail checks do not see, and a later full recovery would find the hole.
void QueueTableImpl::close() {
  WriterTurn turn(*this);
  auto w = writer_.lock();
  if (dropped_.load() || !w->broken.ok() || !w->file) return;
  auto st = state_.lock();
  std::vector<fmt::ReturnedRow> returned;
  for (size_t p = 0; p < st->index.end_pos(); p++) {
    fmt::ReturnedRow r;
    const RowEntry& e = st->index.at(p);
    if (e.state != RowState::kRemoved && st->kept_across_restart(e, &r)) returned.push_back(r);
  }
  SnapshotSource src{w->next_rowid, counters_.rows_inserted.get(), counters_.rows_removed.get(), &w->sources,
                     &st->index, &returned, &st->legacy};
  // The snapshot records the file size: drop the preallocation first (or the next open recovers).
  w->snapshot_written = w->file->release_preallocation().ok() && w->file->sync(SyncMode::kFdatasync).ok() &&
                        write_index_snapshot(*w->file, src).ok();
  // A later acquire() opens a new object for this file; two writers must never append
  // to one file, so this one stops writing (reads still work).
  w->broken = Status(ErrorCode::kIo, "file " + path() + ": table was closed");
}

Status QueueTableImpl::invalidate_snapshot(WriterState& w) {
  if (!w.snapshot_written) return Status::Ok();
  Status s = remove_file(index_snapshot_path(path()));
  if (s.ok()) w.snapshot_written = false;
  return s;
}

}  // namespace q4m
