// Group commit without a writer thread: callers queue requests; whoever finds no
// leader becomes one, writes every pending request as one chunk (one write + one
// sync), publishes the result, and wakes only the callers of that batch plus the
// oldest queued caller (to lead the next batch). Each caller sleeps on its own
// condvar: with many writers a shared notify_all made context switches dominate.
#include <algorithm>

#include "consumer_impl.h"
#include "queue_table_impl.h"
#include "settings.h"

namespace q4m {

void QueueTableImpl::commit(CommitRequest* req) {
  bool led = false;
  {
    auto q = commit_.lock();
    q->pending.push_back(req);
    while (!req->done) {
      if (q->busy) {
        req->wake.wait(q.unique_lock());
        continue;
      }
      q->busy = true;
      std::vector<CommitRequest*> batch;
      batch.swap(q->pending);
      q->pending.swap(q->spare);
      q.unique_lock().unlock();
      run_batch(batch);
      q.unique_lock().lock();
      for (CommitRequest* r : batch) {
        r->done = true;
        // Under the lock: once done is visible the caller may return and free r.
        if (r != req) r->wake.notify_one();
      }
      led = true;
      batch.clear();
      q->spare.swap(batch);
      pass_writer_turn(*q);
    }
  }
  if (led) maybe_auto_compact();
}

// Frees the writer turn and wakes at most one queued caller to lead the next batch. A
// running thread may take the turn first (a handed-over turn would wait for the woken
// thread to be scheduled); it then writes the queued requests in its own batch.
void QueueTableImpl::pass_writer_turn(CommitQueue& q) {
  q.busy = false;
  if (q.turn_waiters > 0) commit_cv_.notify_all();  // maintenance competes like any caller
  if (!q.pending.empty()) q.pending.front()->wake.notify_one();
}

QueueTableImpl::WriterTurn::WriterTurn(QueueTableImpl& t) : t_(t) {
  auto q = t_.commit_.lock();
  q->turn_waiters++;
  while (q->busy) t_.commit_cv_.wait(q.unique_lock());
  q->turn_waiters--;
  q->busy = true;
}

QueueTableImpl::WriterTurn::~WriterTurn() {
  auto q = t_.commit_.lock();
  t_.pass_writer_turn(*q);
}

void QueueTableImpl::run_batch(const std::vector<CommitRequest*>& batch) {
  auto w = writer_.lock();
  Status fail = dropped_.load() ? dropped_status() : w->broken;
  if (!fail.ok()) {
    for (CommitRequest* r : batch) r->status = fail;
    return;
  }
  const uint64_t now = now_ms();
  RowId next = w->next_rowid;
  std::vector<std::pair<uint32_t, RowId>> old_sources;  // to undo on failure
  w->buffer.clear();
  fmt::ChunkBuilder chunk(&w->buffer);
  for (CommitRequest* r : batch) {
    switch (r->kind) {
      case CommitRequest::kInsert:
        for (std::string_view row : *r->rows) {
          r->ids.push_back(next);
          r->offsets.push_back(chunk.add_row(next++, now, row));
        }
        break;
      case CommitRequest::kRelayed: {
        auto it = w->sources.find(r->source_id);
        RowId last = (r->reset || it == w->sources.end()) ? 0 : it->second;
        if (r->source_rowid <= last) break;  // already received: dropped silently
        old_sources.emplace_back(r->source_id, it == w->sources.end() ? 0 : it->second);
        w->sources[r->source_id] = r->source_rowid;
        r->accepted = true;
        r->ids.push_back(next);
        r->offsets.push_back(chunk.add_row(next++, now, r->row));
        chunk.add_srcid(r->source_id, r->source_rowid);  // same chunk as the row: atomic
        break;
      }
      case CommitRequest::kRemove:
        chunk.add_remove(r->remove_ids, r->remove_count);
        break;
    }
  }
  chunk.finish();
  if (chunk.empty()) return;  // nothing to write (empty insert, duplicate relay)

  const uint64_t base = w->file->size();
  Status s = invalidate_snapshot(*w);
  const SyncMode mode = settings().sync();
  if (s.ok()) s = w->file->append(w->buffer, mode != SyncMode::kNone);
  if (s.ok()) {
    s = w->file->sync(mode);
    if (!s.ok()) w->broken = s;  // after a failed sync the page cache may have lost our bytes
  }
  if (!s.ok()) {
    for (auto it = old_sources.rbegin(); it != old_sources.rend(); ++it) {
      if (it->second) w->sources[it->first] = it->second;
      else w->sources.erase(it->first);
    }
    for (CommitRequest* r : batch) {
      r->status = s;
      r->ids.clear();
      r->accepted = false;
    }
    return;
  }
  w->next_rowid = next;
  next_rowid_.store(next);
  file_bytes_.store(w->file->size());
  global_stats().group_commits.add();
  publish(batch, *w->file, base, w->buffer, now);  // only now: hand-off happens after the data is durable
}

void QueueTableImpl::publish(const std::vector<CommitRequest*>& batch, const DataFile& file, uint64_t base,
                             std::string_view written, uint64_t now) {
  uint64_t inserted = 0, removed = 0;
  auto st = state_.lock();
  st->tail.append(file.id(), base, written);
  for (CommitRequest* r : batch) {
    if (r->kind == CommitRequest::kRemove) {
      for (size_t i = 0; i < r->remove_count; i++) {
        const RowId id = r->remove_ids[i];
        RowEntry* e = st->index.find(id);
        if (!e || e->owner != r->remover) continue;  // vanished (truncate) meanwhile
        if (e->state != RowState::kFree) owned_.fetch_sub(1);
        st->index.remove(id);
        removed++;
      }
      continue;
    }
    for (size_t i = 0; i < r->ids.size(); i++) {
      RowEntry e;
      e.id = r->ids[i];
      e.offset = base + r->offsets[i];
      e.time_ms = now;
      std::string_view payload = r->kind == CommitRequest::kInsert ? (*r->rows)[i] : r->row;
      e.length = static_cast<uint32_t>(payload.size());
      st->index.append(e);
      inserted++;
      offer_row(*st, *st->index.find(e.id), payload);
    }
  }
  rows_.store(st->index.live());
  live_bytes_.store(st->index.live_bytes());
  counters_.rows_inserted.add(inserted);
  counters_.rows_removed.add(removed);
  global_stats().rows_written.add(inserted);
  global_stats().rows_removed.add(removed);
}

Status QueueTableImpl::insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids) {
  for (std::string_view r : rows)
    if (r.size() > fmt::kMaxRowLength)
      return Status(ErrorCode::kInvalid, "file " + path() + ": row of " + std::to_string(r.size()) +
                                             " bytes is too large");
  if (ids) ids->clear();
  if (rows.empty()) return Status::Ok();
  CommitRequest req;
  req.kind = CommitRequest::kInsert;
  req.rows = &rows;
  commit(&req);
  if (req.status.ok() && ids) *ids = std::move(req.ids);
  return req.status;
}

Status QueueTableImpl::insert_relayed(std::string_view row, uint32_t source_id, RowId source_rowid, bool reset,
                                      bool* accepted) {
  *accepted = false;
  if (row.size() > fmt::kMaxRowLength)
    return Status(ErrorCode::kInvalid, "file " + path() + ": row of " + std::to_string(row.size()) +
                                           " bytes is too large");
  CommitRequest req;
  req.kind = CommitRequest::kRelayed;
  req.row = row;
  req.source_id = source_id;
  req.source_rowid = source_rowid;
  req.reset = reset;
  commit(&req);
  *accepted = req.status.ok() && req.accepted;
  return req.status;
}

RowId QueueTableImpl::last_relayed_rowid(uint32_t source_id) {
  auto w = writer_.lock();
  auto it = w->sources.find(source_id);
  return it == w->sources.end() ? 0 : it->second;
}

// No look at the index first: only TRUNCATE/DROP can take an owned row away, and then
// publish() skips the id (and recovery ignores a REMOVE of an id it does not know).
Status QueueTableImpl::end_row(const Consumer* c, RowId id) {
  CommitRequest req;
  req.kind = CommitRequest::kRemove;
  req.remove_ids = &id;
  req.remove_count = 1;
  req.remover = c;
  commit(&req);
  if (req.status.code() == ErrorCode::kDropped) return Status::Ok();
  return req.status;
}

Status QueueTableImpl::remove_claimed(Consumer* viewer) {
  std::vector<RowId> ids;
  {
    auto st = state_.lock();
    auto it = st->claims.find(viewer);
    if (it == st->claims.end()) return Status::Ok();
    for (RowId id : it->second) {
      RowEntry* e = st->index.find(id);
      if (e && e->state == RowState::kClaimedForDelete && e->owner == viewer) ids.push_back(id);
    }
    st->claims.erase(it);
  }
  if (ids.empty()) return Status::Ok();
  CommitRequest req;
  req.kind = CommitRequest::kRemove;
  req.remove_ids = ids.data();
  req.remove_count = ids.size();
  req.remover = viewer;
  commit(&req);
  if (!req.status.ok()) {
    // The DELETE failed: its rows go back to the queue instead of staying stuck.
    auto st = state_.lock();
    for (RowId id : ids) {
      RowEntry* e = st->index.find(id);
      if (e && e->state == RowState::kClaimedForDelete && e->owner == viewer) row_became_free(*st, *e);
    }
  }
  return req.status;
}

}  // namespace q4m
