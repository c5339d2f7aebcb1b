// take_over(): the end of a copying ALTER TABLE. The copy (insert_with_history) filled the new
// table with the old one's rows under their own ids, the rows a connection owned held back
// (RowHistory::held). While it ran, the old table went on: rows were consumed, taken,
// returned. Here, with both tables' writers and states held, each copied row takes the state
// its original has now; then the old table forwards its owners here (TableState::moved_to)
// and hands out nothing more. Consumers follow moved_to() on their own thread at their next
// end, abort or lease call (consumer.cc). Should the ALTER fail after all, the server drops
// the new table, which then gives the rows back the same way (mark_dropped).
#include <algorithm>

#include "consumer_impl.h"
#include "queue_table_impl.h"
#include "settings.h"

namespace q4m {

Status QueueTableImpl::moved_status() const {
  return Status(ErrorCode::kMoved, "file " + path() + ": the table's rows moved to the table ALTER TABLE built");
}

std::shared_ptr<QueueTableImpl> QueueTableImpl::moved_to() {
  if (!has_moved()) return nullptr;
  return state_.lock()->moved_to;
}

Status QueueTableImpl::take_over(const std::shared_ptr<QueueTable>& old, bool ids_kept) {
  auto src = std::static_pointer_cast<QueueTableImpl>(old);
  if (!src || src.get() == this) return Status(ErrorCode::kInvalid, "take_over: no other table to take over from");
  // Lock order: the old table's turn, writer and state, then this one's (a give-back, the
  // only other place holding two tables, runs on the same ALTER's thread, never meanwhile).
  WriterTurn src_turn(*src);
  auto src_w = src->writer_.lock();
  if (src->dropped_.load()) return src->dropped_status();
  auto src_st = src->state_.lock();
  if (src_st->moved_to) return Status(ErrorCode::kInvalid, "file " + src->path() + ": its rows moved already");
  WriterTurn turn(*this);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  if (!w->broken.ok()) return w->broken;
  return adopt(*src, *src_w, *src_st, *w, ids_kept ? Adopt::kIdsKept : Adopt::kNewIds);
}

// The table this one took over from takes its rows back (the ALTER failed after the copy).
void QueueTableImpl::give_back_rows() {
  std::shared_ptr<QueueTableImpl> to = state_.lock()->took_over_from.lock();
  if (!to) return;
  WriterTurn turn(*this);
  auto w = writer_.lock();
  auto st = state_.lock();
  if (st->took_over_from.lock() != to) return;
  WriterTurn to_turn(*to);
  auto to_w = to->writer_.lock();
  if (to->dropped_.load() || !to_w->broken.ok()) return;  // nothing to give back to
  // A failure leaves the rows in memory as they are here; only a crash then loses the
  // removals made here meanwhile (their rows come back once more).
  (void)to->adopt(*this, *w, *st, *to_w, Adopt::kGiveBack);
}

namespace {

// The retry delay (queue_abort(seconds)) row `e` of `st` waits for; 0 if none.
uint64_t retry_due(const TableState& st, const RowEntry& e) {
  if (e.state != RowState::kDelayed && e.state != RowState::kClaimedForDelete) return 0;
  auto it = st.delay_tokens.find(e.id);
  return it != st.delay_tokens.end() && it->second.retry ? it->second.due_ms : 0;
}

// Appends `w.buffer` to the file and syncs it as a commit that must be durable would.
Status write_synced(WriterState& w, uint64_t* base) {
  const SyncMode mode = settings().sync();
  *base = w.file->size();
  Status s = w.file->append(w.buffer, mode != SyncMode::kNone);
  if (!s.ok() || mode == SyncMode::kNone) return s;
  s = w.file->sync(mode);
  if (!s.ok()) w.broken = s;  // after a failed sync the page cache may have lost our bytes
  return s;
}

}  // namespace

Status QueueTableImpl::adopt(QueueTableImpl& src, WriterState& src_w, TableState& src_st, WriterState& w,
                             Adopt how) {
  const uint64_t now = now_ms();
  auto st = state_.lock();
  const bool by_id = how == Adopt::kIdsKept || (how == Adopt::kGiveBack && src_st.took_over_ids_kept);
  if (how == Adopt::kNewIds) {
    // New ids: no row can be told from its copy, so nothing may have changed since the copy
    // began (no insert can have come: the ALTER holds the table's metadata lock).
    const uint64_t held = src.owned_.load();
    if (held > 0)
      return Status(ErrorCode::kInvalid, std::to_string(held) + (held == 1 ? " row is" : " rows are") +
                                             " owned by a connection");
    if (src_st.index.live() != st->index.live())
      return Status(ErrorCode::kInvalid, std::to_string(st->index.live()) + " rows were copied but the table holds " +
                                             std::to_string(src_st.index.live()) + " now (rows were consumed meanwhile)");
  }

  // What changes here: rows that `src` no longer has, rows whose history it changed.
  std::vector<RowId> gone;
  std::vector<fmt::ReturnedRow> histories;
  if (by_id) {
    if (how == Adopt::kGiveBack)
      for (RowId id : src_st.removed_since_take_over)
        if (st->index.find(id)) gone.push_back(id);
    for (size_t p = 0; p < st->index.end_pos(); p++) {
      const RowEntry& t = st->index.at(p);
      if (t.state == RowState::kRemoved) continue;
      const RowEntry* s = src_st.index.find(t.id);
      if (!s) {
        // Forward, every row here came from `src`: it was consumed since. A give-back only
        // removes what was removed there (gone, above); the rest were never copied.
        if (how == Adopt::kIdsKept) gone.push_back(t.id);
        continue;
      }
      fmt::ReturnedRow theirs, ours;
      src_st.kept_across_restart(*s, &theirs);
      st->kept_across_restart(t, &ours);
      if (theirs.deliveries != ours.deliveries || theirs.due_ms != ours.due_ms) histories.push_back(theirs);
    }
  }

  // Durable first, as any commit: the removals, the histories, src's relay records and a next
  // id no lower than src's, in one chunk.
  std::vector<std::pair<uint32_t, RowId>> sources;
  for (const auto& [source, last] : src_w.sources) {
    auto it = w.sources.find(source);
    if (it == w.sources.end() || it->second < last) sources.emplace_back(source, last);
  }
  const RowId next = std::max(w.next_rowid, src_w.next_rowid);
  const SyncMode mode = settings().sync();
  w.buffer.clear();
  fmt::ChunkBuilder chunk(&w.buffer, mode == SyncMode::kNone || w.file->has_unsynced_appends());
  if (!gone.empty()) chunk.add_remove(gone.data(), gone.size());
  if (!histories.empty()) chunk.add_returns(histories.data(), histories.size());
  for (const auto& [source, last] : sources) chunk.add_srcid(source, last);
  chunk.add_meta(fmt::Meta{next, counters_.rows_inserted.get(), counters_.rows_removed.get() + gone.size()});
  chunk.finish();
  Status s = invalidate_snapshot(w);
  uint64_t base = 0;
  if (s.ok()) s = write_synced(w, &base);
  if (!s.ok() && how != Adopt::kGiveBack) return s;  // the ALTER fails: `src` stays as it is
  if (s.ok()) {
    st->tail.append(w.file->id(), base, w.buffer);
    file_bytes_.store(w.file->size());
    for (const auto& [source, last] : sources) w.sources[source] = last;
    w.next_rowid = next;
    next_rowid_.store(next);
  }

  // Then in memory.
  note_index_change(*st, 0, remove_rows(*st, gone));
  if (how == Adopt::kGiveBack) {  // this table takes rows and owners again
    st->moved_to.reset();
    moved_to_raw_.store(nullptr, std::memory_order_release);
  }
  if (by_id) {
    for (size_t p = 0; p < st->index.end_pos(); p++) {
      RowEntry& t = st->index.at(p);
      if (t.state == RowState::kRemoved) continue;
      const RowEntry* s = src_st.index.find(t.id);
      if (!s || !restate_row(*st, t, *s, retry_due(src_st, *s), now)) continue;
      if (t.state != RowState::kOwned || !t.owner) continue;
      // Its lease runs on here (a batch's rows share the token and the deadline).
      const Consumer::Impl& owner = t.owner->impl();
      if (const uint64_t token = owner.lease_token.load()) {
        const LeaseClock::time_point at{LeaseClock::duration(owner.lease_at.load())};
        st->leases.push(LeaseDeadline{at, t.id, token});
        watch_deadline(at);
      }
    }
    release_ready(*st);
  }
  if (how == Adopt::kGiveBack) {
    // Nothing was handed out while the rows were away: scans start over, waiters are offered
    // the free rows, the reaper looks at the delays and TTL again.
    st->first_free_hint = 0;
    st->cursors.clear();
    st->free_epoch++;
    for (size_t p = 0; p < st->index.end_pos() && !st->waiters.empty(); p++)
      if (st->takeable(st->index.at(p))) offer_row(*st, st->index.at(p), std::string_view());
    watch_deadline(LeaseClock::now());
  }

  // `src`'s owners whose rows are not held by them here are told at their next call; their
  // rows stay queued there (for a give-back of its own, should one come).
  for (size_t p = 0; p < src_st.index.end_pos(); p++) {
    RowEntry& s = src_st.index.at(p);
    if (s.state != RowState::kOwned || !s.owner) continue;
    const RowEntry* t = by_id ? st->index.find(s.id) : nullptr;
    if (t && t->state == RowState::kOwned && t->owner == s.owner) continue;
    s.owner->impl().rows_moved.store(true);
    s.owner = nullptr;
    src.set_state(src_st, s, RowState::kFree);
  }
  src_st.moved_to = shared_from_this();
  src.moved_to_raw_.store(this, std::memory_order_release);
  if (how == Adopt::kGiveBack) {
    src_st.took_over_from.reset();
    src_st.took_over_ids_kept = false;
    src_st.removed_since_take_over.clear();
  } else {
    st->took_over_from = src.weak_from_this();
    st->took_over_ids_kept = by_id;  // from now on removals here are logged for a give-back
    st->removed_since_take_over.clear();
  }
  return s;
}

bool QueueTableImpl::restate_row(TableState& st, RowEntry& t, const RowEntry& s, uint64_t s_due_ms, uint64_t now) {
  if (t.state == RowState::kClaimedForDelete) return false;  // being removed here (MESSAGE_TTL)
  const uint16_t deliveries = s.deliveries;
  if (s.state == RowState::kOwned && s.owner) {
    if (t.state == RowState::kOwned && t.owner == s.owner && t.deliveries == deliveries) return true;
    if (t.state == RowState::kDelayed) st.delay_tokens.erase(t.id);  // its deadline goes stale
    t.owner = s.owner;
    t.deliveries = deliveries;  // before the state: its group looks at both
    set_state(st, t, RowState::kOwned);
    return true;
  }
  // Queued there (or being removed there by its TTL, which this table applies on its own).
  if (queued(t.state) && t.deliveries == deliveries && retry_due(st, t) == s_due_ms) return true;
  if (t.state == RowState::kDelayed) st.delay_tokens.erase(t.id);
  t.owner = nullptr;
  t.deliveries = deliveries;
  if (st.dies(t))
    set_state(st, t, RowState::kDead);
  else if (s_due_ms > now)
    delay_row(st, t, std::chrono::milliseconds(s_due_ms - now), DelayKind::kRetry);
  else
    row_became_free(st, t);
  return true;
}

uint64_t QueueTableImpl::remove_rows(TableState& st, const std::vector<RowId>& ids) {
  uint64_t removed = 0;
  for (RowId id : ids) {
    RowEntry* e = st.index.find(id);
    if (!e) continue;
    if (e->state == RowState::kClaimedForDelete) {  // a claim of its own (MESSAGE_TTL): drop it too
      auto it = st.claims.find(e->owner);
      if (it != st.claims.end()) it->second.erase(std::remove(it->second.begin(), it->second.end(), id), it->second.end());
    }
    e->owner = nullptr;
    count_state_change(e->state, RowState::kRemoved);
    if (e->state == RowState::kDead) st.dead_ids.erase(id);
    st.delay_tokens.erase(id);
    const bool in_group = e->grouped;
    st.index.remove(id);
    if (in_group) st.groups.remove(id, group_lookup(st));
    removed++;
  }
  return removed;
}

}  // namespace q4m
