// Maintenance of one table's file: compaction, truncate, drop, rename, close.
// Each takes the writer turn, so no commit is in flight while the file is replaced.
#include "consumer_impl.h"
#include "queue_table_impl.h"
#include "settings.h"

namespace q4m {

// Exclusive use of the writer for maintenance: waits for the current leader, then
// keeps new commits queued until destroyed (a queued follower then leads).
class QueueTableImpl::WriterTurn {
 public:
  explicit WriterTurn(QueueTableImpl& t) : t_(t) {
    auto q = t_.commit_.lock();
    while (q->busy) t_.commit_cv_.wait(q.unique_lock());
    q->busy = true;
  }
  ~WriterTurn() {
    auto q = t_.commit_.lock();
    q->busy = false;
    t_.commit_cv_.notify_all();
  }

 private:
  QueueTableImpl& t_;
};

// Writes the table's durable state (and the live rows if keep_rows) to "<path>.tmp",
// syncs it and renames it over the data file; then swaps the file under the state lock.
// TODO(concurrent compaction, settings().use_concurrent_compaction): copy rows without
// the writer turn, then take it only to copy the tail written meanwhile (+ REMOVE
// records for rows removed meanwhile). Today INSERTs wait while rows are copied.
Status QueueTableImpl::rewrite_file(bool keep_rows) {
  WriterTurn turn(*this);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  if (!w->broken.ok()) return w->broken;

  std::vector<RowEntry> rows;
  uint64_t live = 0;
  {
    auto st = state_.lock();
    live = st->index.live();
    if (keep_rows) {
      rows.reserve(live);
      for (size_t p = 0; p < st->index.end_pos(); p++)
        if (st->index.at(p).state != RowState::kRemoved) rows.push_back(st->index.at(p));
    }
  }
  const std::string path = this->path(), tmp = path + ".tmp";
  Status s = remove_file(tmp);
  std::shared_ptr<DataFile> out;
  if (s.ok()) s = DataFile::create(tmp, &out);
  if (!s.ok()) return s;

  // META carries the counters as of its position: rows copied after it are counted
  // again by recovery, so it holds the insert count without them.
  fmt::Meta meta;
  meta.next_rowid = w->next_rowid;
  meta.rows_inserted = counters_.rows_inserted.get() - rows.size();
  meta.rows_removed = counters_.rows_removed.get() + (keep_rows ? 0 : live);
  std::string buf = fmt::file_header();
  uint64_t flushed = 0;
  fmt::ChunkBuilder chunk(&buf);
  chunk.add_meta(meta);
  for (const auto& src : w->sources) chunk.add_srcid(src.first, src.second);
  std::vector<uint64_t> offsets;
  offsets.reserve(rows.size());
  std::string payload;
  const uint64_t flush_at = 4u << 20;
  for (const RowEntry& e : rows) {
    s = w->file->read(e.offset, e.length, &payload);
    if (!s.ok()) break;
    offsets.push_back(flushed + chunk.add_row(e.id, e.time_ms, payload));
    if (buf.size() >= flush_at) {
      chunk.finish();
      s = out->append(buf);
      if (!s.ok()) break;
      flushed += buf.size();
      buf.clear();
    }
  }
  chunk.finish();
  if (s.ok() && !buf.empty()) s = out->append(buf);
  // Always synced, whatever the sync mode: the rename must never expose an unwritten file.
  if (s.ok()) s = out->sync(SyncMode::kFdatasync);
  if (s.ok()) s = rename_file(tmp, path);  // also fsyncs the directory
  std::shared_ptr<DataFile> fresh;
  if (s.ok()) s = DataFile::open(path, &fresh);
  if (!s.ok()) {
    out.reset();
    remove_file(tmp);
    return s;
  }
  {
    auto st = state_.lock();
    st->file = fresh;
    if (keep_rows) {
      for (size_t i = 0; i < rows.size(); i++)
        if (RowEntry* e = st->index.find(rows[i].id)) e->offset = offsets[i];
    } else {  // truncate: every row vanishes, owned ones too; waiters keep waiting
      st->index.clear();
      st->claims.clear();
      st->cursors.clear();
      st->first_free_hint = 0;
      rows_.store(0);
      owned_.store(0);
      live_bytes_.store(0);
    }
  }
  if (!keep_rows) counters_.rows_removed.add(live);
  w->file = fresh;
  file_bytes_.store(fresh->size());
  return Status::Ok();
}

Status QueueTableImpl::compact() {
  Status s = rewrite_file(true);
  if (s.ok()) {
    counters_.compactions.add();
    global_stats().compactions.add();
  }
  return s;
}

Status QueueTableImpl::truncate() { return rewrite_file(false); }

void QueueTableImpl::maybe_auto_compact() {
  const StorageSettings& cfg = settings();
  uint64_t file = file_bytes_.load();
  if (file < cfg.compaction_min_file_bytes.load(std::memory_order_relaxed)) return;
  uint64_t live = fmt::kFileHeaderSize + live_bytes_.load() + rows_.load() * fmt::kRowHeaderSize;
  uint64_t reclaimable = file > live ? file - live : 0;
  int percent = cfg.compaction_removed_percent.load(std::memory_order_relaxed);
  if (reclaimable * 100 < static_cast<uint64_t>(percent < 0 ? 0 : percent) * file) return;
  if (compacting_.exchange(true)) return;  // someone else is already at it
  compact();  // a failure leaves the old file in place; the next commit retries
  compacting_.store(false);
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
  st->index.clear();  // owned rows vanish: their owners' end()/abort() just leave owner mode
  st->claims.clear();
  st->cursors.clear();
  st->file.reset();
  w->file.reset();
  rows_.store(0);
  owned_.store(0);
  waiters_.store(0);
}

Status QueueTableImpl::rename_to(const std::string& to) {
  WriterTurn turn(*this);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  Status s = rename_file(path(), to);
  if (!s.ok()) return s;
  std::shared_ptr<DataFile> fresh;
  if (DataFile::open(to, &fresh).ok()) {  // same inode; only so messages name the new path
    w->file = fresh;
    state_.lock()->file = fresh;
  }
  set_path(to);
  return Status::Ok();
}

void QueueTableImpl::close() {
  WriterTurn turn(*this);  // waits for an in-flight commit; every commit is already durable
  // TODO(fast open): write a checksummed index snapshot here.
}

}  // namespace q4m
