// Group commit without a writer thread: callers queue requests; whoever finds no
// leader becomes one, writes every pending request as one chunk (one write + one
// sync), publishes the result, and wakes only the callers of that batch plus the
// oldest queued caller (to lead the next batch). Each caller sleeps on its own futex
// word and never takes the commit_ lock again once woken: with many writers a shared
// notify_all, or wakers holding the lock the woken need, made context switches dominate.
// Before sleeping, a caller spins for a short budget (spin_wait.h): most waits end
// within it, and a thread that never slept needs no wake-up.
#include <algorithm>
#include <optional>

#include "blocking.h"

#include "consumer_impl.h"
#include "futex.h"
#include "queue_table_impl.h"
#include "settings.h"
#include "spin_wait.h"

namespace q4m {

namespace {

// The rows a batch may still add under the table's MAX_ROWS (set_max_rows). The leader
// holds the writer lock, and only a leader adds rows, so the count it starts from can only
// fall meanwhile (a DELETE or an expiry publishing): the limit is never overshot.
class RowRoom {
 public:
  RowRoom(uint64_t max_rows, uint64_t rows, Counter* refused_rows)
      : max_(max_rows), held_(rows), refused_rows_(refused_rows) {}
  // Room for n more rows: takes it, or sets *refused and takes none (a request's rows go in
  // together or not at all).
  bool take(uint64_t n, Status* refused) {
    if (max_ == 0 || (held_ <= max_ && n <= max_ - held_)) {
      held_ += n;
      return true;
    }
    refused_rows_->add(n);
    *refused = Status(ErrorCode::kFull, "it holds " + std::to_string(held_) + " rows and its limit is " +
                                            std::to_string(max_) + " (MAX_ROWS): " + std::to_string(n) +
                                            (n == 1 ? " row does" : " rows do") + " not fit");
    return false;
  }

 private:
  const uint64_t max_;
  uint64_t held_;
  Counter* refused_rows_;
};

// Takes the writer turn and every pending request (ours among them) as the batch.
void take_batch(CommitQueue& q, std::vector<CommitRequest*>* batch) {
  q.busy = true;
  batch->swap(q.pending);
  q.pending.swap(q.spare);
  for (CommitRequest* r : *batch) r->taken = true;
}

}  // namespace

void QueueTableImpl::commit(CommitRequest* req) {
  std::vector<CommitRequest*> batch;
  {
    auto q = commit_.lock();
    q->pending.push_back(req);
    if (!q->busy) take_batch(*q, &batch);
  }
  std::optional<BlockingScope> sleeping;  // announced for syncs only: a write takes microseconds
  while (batch.empty()) {  // queued behind a leader
    uint32_t s;
    while ((s = req->signal.load(std::memory_order_acquire)) == CommitRequest::kQueued) {
      if (!sleeping && req->sync && settings().sync() != SyncMode::kNone) sleeping.emplace(BlockingWait::kCommit);
      const uint32_t spin_us = settings().commit_spin_us.load(std::memory_order_relaxed);
      if (SpinWait::spin_until_changed(req->signal, CommitRequest::kQueued, spin_us)) continue;
      futex_wait(&req->signal, CommitRequest::kQueued);
    }
    if (s == CommitRequest::kDone) return;
    // kTryLead: the turn was free when we were told. A running thread may have taken it,
    // and our request with it, since: then that leader finishes it and we wait again.
    auto q = commit_.lock();
    if (req->taken) {
      uint32_t try_lead = CommitRequest::kTryLead;  // the leader may store kDone right now
      if (!req->signal.compare_exchange_strong(try_lead, CommitRequest::kQueued, std::memory_order_acq_rel))
        return;  // kDone
      continue;
    }
    req->signal.store(CommitRequest::kQueued, std::memory_order_relaxed);  // pending: only we write it
    if (!q->busy) take_batch(*q, &batch);
  }
  sleeping.reset();
  lead(req, batch);
  // Not after a return: the lease reaper records those, and must not stop for a compaction.
  if (req->kind != CommitRequest::kReturn) maybe_auto_compact();
}

void QueueTableImpl::lead(CommitRequest* req, std::vector<CommitRequest*>& batch) {
  run_batch(req, batch);
  CommitRequest* next = nullptr;
  {
    auto q = commit_.lock();
    next = pass_writer_turn(*q);
  }
  if (next) futex_wake_one(&next->signal);  // the next leader first: its sync starts sooner
  for (CommitRequest* r : batch) {
    if (r == req || !r) continue;  // null: answered before the sync
    // Once kDone is visible the caller may return and free r: r is not touched after.
    r->signal.store(CommitRequest::kDone, std::memory_order_release);
    futex_wake_one(&r->signal);
  }
  batch.clear();
  auto q = commit_.lock();
  if (q->spare.capacity() < batch.capacity()) q->spare.swap(batch);  // reuse the allocation
}

// Frees the writer turn and tells the oldest queued caller (if any) that it may lead the
// next batch; returns it, to be woken after the lock is released. A running thread may
// take the turn first (a handed-over turn would wait for the woken thread to be
// scheduled); it then writes the queued requests in its own batch.
CommitRequest* QueueTableImpl::pass_writer_turn(CommitQueue& q) {
  q.busy = false;
  if (q.turn_waiters > 0) commit_cv_.notify_all();  // maintenance competes like any caller
  if (q.pending.empty()) return nullptr;
  CommitRequest* next = q.pending.front();  // alive: a pending request is in no batch yet
  next->signal.store(CommitRequest::kTryLead, std::memory_order_release);
  return next;
}

QueueTableImpl::WriterTurn::WriterTurn(QueueTableImpl& t) : t_(t) {
  auto q = t_.commit_.lock();
  q->turn_waiters++;
  while (q->busy) t_.commit_cv_.wait(q.unique_lock());
  q->turn_waiters--;
  q->busy = true;
}

QueueTableImpl::WriterTurn::~WriterTurn() {
  CommitRequest* next;
  {
    auto q = t_.commit_.lock();
    next = t_.pass_writer_turn(*q);
  }
  if (next) futex_wake_one(&next->signal);
}

namespace {

// A row's insert time: now, or for a copy the time it had (RowHistory, 0 = now).
uint64_t inserted_at(const CommitRequest& r, size_t i, uint64_t now) {
  return r.history && r.history[i].insert_time_ms ? r.history[i].insert_time_ms : now;
}

// A copy's rows that keep their ids (RowHistory::id) must come in increasing order, from the
// table's next id on: else *why is set and none of the request's rows is written.
bool kept_ids_fit(const CommitRequest& r, const std::vector<size_t>& rows, RowId next, Status* why) {
  if (!r.history) return true;
  for (size_t i : rows) {
    const RowId id = r.history[i].id;
    if (id == 0) {
      next++;
      continue;
    }
    if (id < next) {
      *why = Status(ErrorCode::kInvalid, "copied row id " + std::to_string(id) + " is below the table's next row id " +
                                             std::to_string(next) + ": ids must increase");
      return false;
    }
    next = id + 1;
  }
  return true;
}

// A copy's deliveries and retry delays, as a RETURN record under the rows' ids in the
// rows' own chunk: a crash keeps both or neither.
void add_kept_histories(fmt::ChunkBuilder& chunk, CommitRequest* r) {
  r->histories_kept.clear();
  for (size_t i = 0; i < r->ids.size(); i++) {
    const RowHistory& h = r->history[r->written[i]];  // a copy: every row is written
    if (h.deliveries > 0 || h.due_ms > 0) r->histories_kept.push_back(fmt::ReturnedRow{r->ids[i], h.deliveries, h.due_ms});
  }
  if (!r->histories_kept.empty()) chunk.add_returns(r->histories_kept.data(), r->histories_kept.size());
}

}  // namespace

void QueueTableImpl::run_batch(const CommitRequest* leader, std::vector<CommitRequest*>& batch) {
  auto w = writer_.lock();
  // Moved first: an owner's end must reach the table its row moved to, even once this one
  // is dropped (a dropped table's end would look like success).
  Status fail = has_moved() ? moved_status() : dropped_.load() ? dropped_status() : w->broken;
  if (!fail.ok()) {
    for (CommitRequest* r : batch) r->status = fail;
    return;
  }
  const uint64_t now = now_ms();
  const SyncMode mode = settings().sync();
  const bool sync = mode != SyncMode::kNone &&
                    std::any_of(batch.begin(), batch.end(), [](const CommitRequest* r) { return r->sync; });
  RowId next = w->next_rowid;
  std::vector<std::pair<uint32_t, RowId>> old_sources;  // to undo on failure
  w->buffer.clear();
  // Flagged `unsynced` (docs/file-format.md): a chunk no sync follows, and also the first
  // synced chunk after such chunks, since a power cut before its sync ends may keep it and
  // lose them. Recovery then cuts both as a lost tail; neither caller had been answered.
  fmt::ChunkBuilder chunk(&w->buffer, !sync || w->file->has_unsynced_appends());
  RowRoom room(max_rows_.load(std::memory_order_relaxed), rows_.load(), &counters_.rows_refused);
  std::vector<std::pair<std::string, uint64_t>> dedup_undo;  // keys this batch put in the window
  uint64_t deduplicated = 0;
  std::vector<size_t> rows;  // of one request: the indices of the rows to write
  // The rows of r to write are in `rows`: checks their room under MAX_ROWS (else takes their
  // keys out of the window again, from undo position `undo_from`) and appends them.
  auto write_rows = [&](CommitRequest* r, size_t undo_from) {
    if (!kept_ids_fit(*r, rows, next, &r->status) || !room.take(rows.size(), &r->status)) {
      w->dedup.forget_batch(&dedup_undo, undo_from);
      return false;
    }
    for (size_t i : rows) {
      const RowId id = r->history && r->history[i].id ? r->history[i].id : next;  // a copy keeps its ids
      next = id + 1;
      r->ids.push_back(id);
      r->written.push_back(i);
      r->offsets.push_back(chunk.add_row(id, inserted_at(*r, i, now), (*r->rows)[i]));
    }
    deduplicated += r->deduplicated;
    return true;
  };
  for (CommitRequest* r : batch) {
    switch (r->kind) {
      case CommitRequest::kInsert: {
        rows.clear();
        const size_t undo_from = dedup_undo.size();
        r->deduplicated = unique_rows(*w, *r, 0, now, &rows, &dedup_undo);
        if (!write_rows(r, undo_from)) break;
        if (r->history) add_kept_histories(chunk, r);
        break;
      }
      case CommitRequest::kRelayed: {
        auto it = w->sources.find(r->source_id);
        const RowId last = (r->reset || it == w->sources.end()) ? 0 : it->second;
        const size_t n = r->rows->size();
        while (r->dropped < n && r->source_rowids[r->dropped] <= last) r->dropped++;  // received before
        if (r->dropped == n) break;
        rows.clear();
        const size_t undo_from = dedup_undo.size();
        r->deduplicated = unique_rows(*w, *r, r->dropped, now, &rows, &dedup_undo);
        if (!write_rows(r, undo_from)) break;
        old_sources.emplace_back(r->source_id, it == w->sources.end() ? 0 : it->second);
        w->sources[r->source_id] = r->source_rowids[n - 1];  // duplicates were received too
        chunk.add_srcid(r->source_id, r->source_rowids[n - 1]);  // same chunk as the rows: atomic
        break;
      }
      case CommitRequest::kRemove:
        chunk.add_remove(r->remove_ids, r->remove_count);
        break;
      case CommitRequest::kReturn:
        chunk.add_returns(r->returns, r->return_count);
        break;
    }
  }
  chunk.finish();
  if (chunk.empty()) {  // nothing to write (empty insert, duplicate relay, only dedup duplicates)
    counters_.rows_deduplicated.add(deduplicated);
    return;
  }

  const uint64_t base = w->file->size();
  Status s = invalidate_snapshot(*w);
  if (s.ok()) s = w->file->append(w->buffer, mode != SyncMode::kNone);
  if (s.ok() && sync) {
    answer_unsynced(leader, batch);
    BlockingScope syncing(BlockingWait::kSync);
    s = w->file->sync(mode);
    if (!s.ok()) w->broken = s;  // after a failed sync the page cache may have lost our bytes
  }
  if (!s.ok()) {
    w->dedup.forget_batch(&dedup_undo);  // a retry of these rows must not be taken for a duplicate
    dedup_keys_.store(w->dedup.size(), std::memory_order_relaxed);
    for (auto it = old_sources.rbegin(); it != old_sources.rend(); ++it) {
      if (it->second) w->sources[it->first] = it->second;
      else w->sources.erase(it->first);
    }
    for (CommitRequest* r : batch) {
      if (!r) continue;
      r->status = s;
      r->ids.clear();
    }
    return;
  }
  w->next_rowid = next;
  next_rowid_.store(next);
  counters_.rows_deduplicated.add(deduplicated);
  if (w->dedup_column) dedup_keys_.store(w->dedup.size(), std::memory_order_relaxed);
  file_bytes_.store(w->file->size());
  global_stats().group_commits.add();
  if (!sync && mode != SyncMode::kNone &&
      std::any_of(batch.begin(), batch.end(), [](const CommitRequest* r) { return r->kind == CommitRequest::kRemove; }))
    global_stats().unsynced_removal_commits.add();
  publish(batch, *w->file, base, w->buffer, now);  // only now: hand-off happens after the data is durable
}

void QueueTableImpl::answer_unsynced(const CommitRequest* leader, std::vector<CommitRequest*>& batch) {
  auto unsynced = [](const CommitRequest* r) { return !r->sync; };
  auto unsynced_removal = [](const CommitRequest* r) { return r->kind == CommitRequest::kRemove && !r->sync; };
  if (std::none_of(batch.begin(), batch.end(), unsynced)) return;
  if (std::any_of(batch.begin(), batch.end(), unsynced_removal)) {
    auto st = state_.lock();
    uint64_t removed = 0;
    for (const CommitRequest* r : batch)
      if (unsynced_removal(r)) removed += publish_removal(*st, *r);
    note_index_change(*st, 0, removed);
  }
  for (CommitRequest*& r : batch) {
    if (!unsynced(r)) continue;
    CommitRequest* answered = r;
    r = nullptr;
    if (answered->kind == CommitRequest::kRemove) global_stats().removals_answered_before_sync.add();
    if (answered == leader) continue;  // the leader returns after the sync, like any leader
    answered->signal.store(CommitRequest::kDone, std::memory_order_release);  // not touched after
    futex_wake_one(&answered->signal);
  }
}

uint64_t QueueTableImpl::publish_removal(TableState& st, const CommitRequest& r) {
  uint64_t removed = 0;
  bool grouped = false;
  for (size_t i = 0; i < r.remove_count; i++) {
    const RowId id = r.remove_ids[i];
    RowEntry* e = st.index.find(id);
    if (!e || e->owner != r.remover) continue;  // vanished (truncate) meanwhile
    count_state_change(e->state, RowState::kRemoved);
    if (e->state == RowState::kDead) st.dead_ids.erase(id);  // (a dead row is claimed first: not expected)
    if (!st.delay_tokens.empty()) st.delay_tokens.erase(id);  // its deadline is stale now
    const bool in_group = e->grouped;
    st.index.remove(id);
    if (st.took_over_ids_kept) st.removed_since_take_over.push_back(id);  // for a give-back (take_over)
    if (in_group) {
      st.groups.remove(id, group_lookup(st));
      grouped = true;
    }
    removed++;
  }
  if (grouped) release_ready(st);  // the next row of each group may go now
  return removed;
}

void QueueTableImpl::publish(const std::vector<CommitRequest*>& batch, const DataFile& file, uint64_t base,
                             std::string_view written, uint64_t now) {
  uint64_t inserted = 0, removed = 0;
  uint64_t oldest_ms = now;  // of the inserted rows: a copy's keep their age
  bool copied_history = false;
  auto st = state_.lock();
  st->tail.append(file.id(), base, written);
  for (CommitRequest* r : batch) {
    if (!r || r->kind == CommitRequest::kReturn) continue;  // answered before the sync / nothing to publish
    if (r->kind == CommitRequest::kRemove) {
      removed += publish_removal(*st, *r);
      continue;
    }
    for (size_t i = 0; i < r->ids.size(); i++) {
      RowEntry e;
      e.id = r->ids[i];
      e.offset = base + r->offsets[i];
      const size_t row = r->written[i];
      e.time_ms = inserted_at(*r, row, now);  // kRelayed: no history
      oldest_ms = std::min(oldest_ms, e.time_ms);
      std::string_view payload = (*r->rows)[row];
      e.length = static_cast<uint32_t>(payload.size());
      std::string key;
      e.grouped = st->message_group && row_key(*st->message_group, payload, &key);
      st->index.append(e);
      inserted++;
      if (e.grouped) st->groups.add(e.id, key, group_lookup(*st));
      RowEntry& added = *st->index.find(e.id);
      if (r->history && queue_copied_row(*st, added, r->history[row], now)) {
        copied_history = true;
        continue;
      }
      queue_row(*st, added, payload, static_cast<int64_t>(now));
    }
  }
  if (copied_history) release_ready(*st);  // rows behind a copied row that is dead or delayed
  // New rows only became ready here, and queue_row offered each that may go, as it offers an
  // ungrouped one: no cursor is past them, so nothing else to do.
  st->groups.forget_newly_ready();
  if (inserted != 0 && st->ttl_ms != 0 && !st->ttl_watched) {  // the oldest queued row is one of these
    st->ttl_watched = true;
    const uint64_t expires_ms = oldest_ms + st->ttl_ms;
    watch_deadline(LeaseClock::now() + std::chrono::milliseconds(expires_ms > now ? expires_ms - now : 0));
  }
  note_index_change(*st, inserted, removed);
}

void QueueTableImpl::note_index_change(const TableState& st, uint64_t inserted, uint64_t removed) {
  rows_.store(st.index.live());
  live_bytes_.store(st.index.live_bytes());
  counters_.rows_inserted.add(inserted);
  counters_.rows_removed.add(removed);
  global_stats().rows_written.add(inserted);
  global_stats().rows_removed.add(removed);
}

Status QueueTableImpl::check_row_lengths(const std::vector<std::string_view>& rows) const {
  for (std::string_view r : rows)
    if (r.size() > fmt::kMaxRowLength)
      return Status(ErrorCode::kInvalid, "file " + path() + ": row of " + std::to_string(r.size()) +
                                             " bytes is too large");
  return Status::Ok();
}

Status QueueTableImpl::insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids,
                              size_t* deduplicated) {
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  if (ids) ids->clear();
  if (deduplicated) *deduplicated = 0;
  if (rows.empty()) return Status::Ok();
  CommitRequest req;
  req.kind = CommitRequest::kInsert;
  req.rows = &rows;
  commit(&req);
  if (req.status.ok() && ids) *ids = std::move(req.ids);
  if (req.status.ok() && deduplicated) *deduplicated = req.deduplicated;
  return req.status;
}

Status QueueTableImpl::insert_with_history(const std::vector<std::string_view>& rows,
                                           const std::vector<RowHistory>& history) {
  if (history.size() != rows.size())
    return Status(ErrorCode::kInvalid, "insert_with_history: " + std::to_string(rows.size()) + " rows but " +
                                           std::to_string(history.size()) + " histories");
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  if (rows.empty()) return Status::Ok();
  CommitRequest req;
  req.kind = CommitRequest::kInsert;
  req.rows = &rows;
  req.history = history.data();
  commit(&req);
  return req.status;
}

Status QueueTableImpl::insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id,
                                      const RowId* source_rowids, bool reset, size_t* dropped) {
  *dropped = 0;
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  for (size_t i = 0; i < rows.size(); i++) {
    if (source_rowids[i] == 0 || (i > 0 && source_rowids[i] <= source_rowids[i - 1]))
      return Status(ErrorCode::kInvalid, "relayed source row ids must be positive and increase; got " +
                                             std::to_string(source_rowids[i]) + " at position " + std::to_string(i + 1));
  }
  if (rows.empty()) return Status::Ok();
  CommitRequest req;
  req.kind = CommitRequest::kRelayed;
  req.rows = &rows;
  req.source_rowids = source_rowids;
  req.source_id = source_id;
  req.reset = reset;
  commit(&req);
  if (req.status.ok()) *dropped = req.dropped;
  return req.status;
}

RowId QueueTableImpl::last_relayed_rowid(uint32_t source_id) {
  auto w = writer_.lock();
  auto it = w->sources.find(source_id);
  return it == w->sources.end() ? 0 : it->second;
}

void QueueTableImpl::record_returns(const std::vector<fmt::ReturnedRow>& rows) {
  if (rows.empty()) return;
  CommitRequest req;
  req.kind = CommitRequest::kReturn;
  req.returns = rows.data();
  req.return_count = rows.size();
  req.sync = false;
  // A failure (table closed, dropped or its file broken) loses only the count and delay
  // across a restart, as it did before RETURN records existed; the row itself is queued.
  commit(&req);
  if (req.status.ok()) global_stats().returns_recorded.add(rows.size());
}

// No look at the index first: only TRUNCATE/DROP can take an owned row away (a lease
// can't: Consumer::end() settles it first), and then publish() skips the id (and
// recovery ignores a REMOVE of an id it does not know).
Status QueueTableImpl::end_rows(const Consumer* c, const RowId* ids, size_t count) {
  CommitRequest req;
  req.kind = CommitRequest::kRemove;
  req.remove_ids = ids;
  req.remove_count = count;
  req.remover = c;
  req.sync = c->sync_removals();
  commit(&req);
  if (req.status.code() == ErrorCode::kDropped) return Status::Ok();
  return req.status;
}

Status QueueTableImpl::remove_claimed(Consumer* viewer) {
  size_t removed = 0;
  return remove_claimed_rows(viewer, &removed);
}

Status QueueTableImpl::remove_claimed_rows(Consumer* viewer, size_t* removed) {
  *removed = 0;
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
  req.sync = viewer->sync_removals();
  commit(&req);
  if (req.status.ok()) {
    *removed = ids.size();
  } else {
    // The DELETE failed: its rows go back to the queue instead of staying stuck.
    auto st = state_.lock();
    for (RowId id : ids) {
      RowEntry* e = st->index.find(id);
      if (e && e->state == RowState::kClaimedForDelete && e->owner == viewer) unclaim(*st, *e);
    }
  }
  return req.status;
}

}  // namespace q4m
