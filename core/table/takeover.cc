// take_over(): the end of a copying ALTER TABLE. The copy (insert_with_history) filled the new
// table with the old one's rows under their own ids, the rows a connection owned held back
// (RowHistory::held: kOwned by no holder). While it ran, the old table went on: rows were
// consumed, taken, returned. Here, with both tables' writer turns, writers and states held,
// each copied row takes the state its original has now, through move() (so the policies
// follow: message groups, dead letters, delays), the policies carry what is not in the rows
// (take_over hooks: the holders' deliveries and leases, the relay records), one synced chunk
// makes it durable, and the old table steps aside: it hands out nothing and passes its
// holders' calls on to this one (State::successor). Should the ALTER fail after all, the
// server drops the new table, which gives the rows back the same way (give_rows_back()).
#include <algorithm>

#include "core/table/table.h"
#include "core/util/blocking.h"
#include "core/util/settings.h"

namespace q4m {

namespace {

// Appends `bytes` to `file` and syncs them as a durable commit does; *base = where they
// start. After a failed sync the page cache may have lost them: *broken is set.
Status write_synced(DataFile& file, const std::string& bytes, SyncMode mode, uint64_t* base, Status* broken) {
  *base = file.size();
  Status s = file.append(bytes, mode != SyncMode::kNone);
  if (!s.ok() || mode == SyncMode::kNone) return s;
  BlockingScope syncing(BlockingWait::kSync);
  s = file.sync(mode);
  if (!s.ok()) *broken = s;
  return s;
}

Status invalid(const std::string& why) { return Status(ErrorCode::kInvalid, why); }

}  // namespace

std::shared_ptr<Table> Table::successor() {
  if (!successor_raw_.load(std::memory_order_acquire)) return nullptr;
  return state_.lock()->successor;
}

Status Table::moved_status() const {
  return Status(ErrorCode::kMoved, "file " + path() + ": the table's rows moved to the table ALTER TABLE built");
}

Status Table::take_over(const std::shared_ptr<QueueTable>& old, bool ids_kept) {
  auto src = std::dynamic_pointer_cast<Table>(old);
  if (!src || src.get() == this) return invalid("take_over: no other table to take over from");
  // A subscription's state lives beside the rows (subscriptions.h); the copy carries none of it.
  if (src->subscriptions_.any())
    return invalid("file " + src->path() + ": a copying ALTER TABLE would lose the table's subscriptions "
                   "(queue_unsubscribe() them first, or use an ALTER that changes the definition only)");
  // Lock order: the old table's turn, writer and state, then this one's. Only the ALTER's own
  // thread holds two tables' locks (here, or in give_rows_back() on a failed ALTER, never
  // both at once); holders' calls passed on to the successor hold no lock of the table they
  // leave.
  CommitPipeline::Turn src_turn(src->pipeline_);
  auto src_w = src->writer_.lock();
  if (src->dropped_.load()) return src->dropped_status();
  auto src_st = src->state_.lock();
  if (src_st->successor) return invalid("file " + src->path() + ": its rows moved already");
  if (Status s = src->refuse_with_prepared(*src_st, "a copying ALTER TABLE"); !s.ok()) return s;
  CommitPipeline::Turn turn(pipeline_);
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  if (!w->broken.ok()) return w->broken;
  auto st = state_.lock();
  if (st->successor) return invalid("file " + path() + ": its rows moved already");
  return adopt(*src, *src_w, *src_st, *w, *st, ids_kept ? Adopt::kIdsKept : Adopt::kNewIds);
}

void Table::give_rows_back() {
  std::shared_ptr<Table> to = state_.lock()->took_over_from.lock();
  if (!to) return;
  // This table's locks first, then the receiver's: see take_over() for why that is safe.
  CommitPipeline::Turn turn(pipeline_);
  auto w = writer_.lock();
  auto st = state_.lock();
  if (st->took_over_from.lock() != to) return;
  CommitPipeline::Turn to_turn(to->pipeline_);
  auto to_w = to->writer_.lock();
  if (to->dropped_.load() || !to_w->broken.ok()) return;  // nothing to give back to
  auto to_st = to->state_.lock();
  (void)to->adopt(*this, *w, *st, *to_w, *to_st, Adopt::kGiveBack);
}

void Table::predecessor_dropped(const Table* dropped) {
  auto st = state_.lock();
  std::shared_ptr<Table> from = st->took_over_from.lock();
  if (from && from.get() != dropped) return;
  st->took_over_from.reset();
  st->took_over_by_id = false;
  st->removed_since_take_over.clear();
}

Status Table::adopt(Table& src, Writer& src_w, State& src_st, Writer& w, State& st, Adopt how) {
  const bool by_id = how == Adopt::kIdsKept || (how == Adopt::kGiveBack && src_st.took_over_by_id);
  if (how == Adopt::kNewIds) {
    // New ids: no row can be told from its copy, so nothing may have changed since the copy
    // began (no INSERT can have come: the ALTER holds the table's metadata lock).
    uint64_t owned = 0;
    for (size_t p = 0; p < src_st.index.end_pos(); p++) owned += src_st.index.at(p).state == RowState::kOwned;
    if (owned > 0)
      return invalid(std::to_string(owned) + (owned == 1 ? " row is" : " rows are") + " owned by a connection");
    if (src_st.index.live() != st.index.live())
      return invalid(std::to_string(st.index.live()) + " rows were copied but the table holds " +
                     std::to_string(src_st.index.live()) + " now (rows were consumed meanwhile)");
  }

  // What changes in the file: rows `src` no longer has, rows whose history it changed.
  std::vector<RowId> gone;
  std::vector<fmt::ReturnedRow> histories;
  if (by_id) {
    if (how == Adopt::kGiveBack)
      for (RowId id : src_st.removed_since_take_over)
        if (st.index.find(id)) gone.push_back(id);
    for (size_t p = 0; p < st.index.end_pos(); p++) {
      const RowEntry& t = st.index.at(p);
      if (t.state == RowState::kRemoved) continue;
      const RowEntry* s = src_st.index.find(t.id);
      if (!s) {
        // Every row here came from `src`: it was consumed since. (A give-back removes only
        // what was removed there, above.)
        if (how == Adopt::kIdsKept) gone.push_back(t.id);
        continue;
      }
      fmt::ReturnedRow theirs, ours;
      kept_across_restart(src_st, *s, &theirs);
      kept_across_restart(st, t, &ours);
      if (theirs.deliveries != ours.deliveries || theirs.due_ms != ours.due_ms) histories.push_back(theirs);
    }
  }

  // Durable first, as any commit: the removals, the histories, what the writer policies carry
  // (relay records) and a next id no lower than src's, in one synced chunk.
  const SyncMode mode = settings().sync();
  WriterContext wctx;
  wctx.now_ms = now_ms();
  wctx.rows = rows_.load();
  wctx.counters = &counters_;
  w.buffer.clear();
  const bool flagged = mode == SyncMode::kNone || w.file->has_unsynced_appends();
  fmt::ChunkBuilder chunk(&w.buffer, flagged);
  if (!gone.empty()) chunk.add_remove(gone.data(), gone.size());
  if (!histories.empty()) chunk.add_returns(histories.data(), histories.size());
  w.policies.each([&](auto& p) { p.begin_batch(wctx); });
  w.policies.each_with(src_w.policies, [&](auto& mine, const auto& theirs) { mine.take_over(theirs, chunk); });
  const IdSequence ids{std::max(w.ids.next, src_w.ids.next), std::max(w.ids.floor, src_w.ids.floor)};
  chunk.add_meta(fmt::Meta{ids.next, counters_.rows_inserted.get(), counters_.rows_removed.get() + gone.size(), ids.floor});
  chunk.finish();
  Status s = invalidate_snapshot(w);
  uint64_t base = 0;
  if (s.ok()) s = write_synced(*w.file, w.buffer, mode, &base, &w.broken);
  if (!s.ok()) {
    w.policies.each([&](auto& p) { p.failed(wctx); });
    // The ALTER fails, and `src` stays as it is. A give-back goes on in memory: only a crash
    // then brings back the rows removed in the other table meanwhile.
    if (how != Adopt::kGiveBack) return s;
  } else {
    w.policies.each([&](auto& p) { p.written(wctx); });
    st.tail.append(w.file->id(), base, w.buffer);
    file_bytes_.store(w.file->size());
    set_ids(w, ids);
    w.tail_flagged = flagged;
  }

  // Then in memory.
  RowContext ctx = context(st);
  uint64_t removed = 0;
  for (RowId id : gone) {
    RowEntry* e = st.index.find(id);
    if (!e) continue;
    remove(st, *e, ctx);
    removed++;
  }
  note_index_change(st, 0, removed);
  if (how == Adopt::kGiveBack) {  // this table takes rows and holders again
    st.successor.reset();
    successor_raw_.store(nullptr, std::memory_order_release);
  }
  if (by_id) {
    for (size_t p = 0; p < st.index.end_pos(); p++) {
      RowEntry& t = st.index.at(p);
      if (t.state == RowState::kRemoved) continue;
      if (const RowEntry* s_row = src_st.index.find(t.id)) restate(st, t, src_st, *s_row, ctx);
    }
  }
  st.policies.each_with(src_st.policies, [&](auto& mine, const auto& theirs) { mine.take_over(theirs, ctx); });
  if (how == Adopt::kGiveBack) {
    // Nothing was handed out while the rows were away: scans start over, waiters are offered
    // the takeable rows, and the timer pass looks at delays, leases and TTL again.
    st.first_free_hint = 0;
    st.cursors.clear();
    st.free_epoch++;
    for (size_t p = 0; p < st.index.end_pos() && !st.waiters.empty(); p++)
      if (takeable(st, st.index.at(p))) offer(st, st.index.at(p), std::string_view(), ctx);
    ctx.wake_at(ctx.now());
  }
  finish(st, ctx);

  // `src` steps aside. Its owners whose rows are not theirs here are told at their next call
  // (Holder::rows_moved); their rows stay queued there (for a give-back of its own).
  src_st.successor = shared_from_this();
  src.successor_raw_.store(this, std::memory_order_release);
  RowContext src_ctx = src.context(src_st);
  for (size_t p = 0; p < src_st.index.end_pos(); p++) {
    RowEntry& o = src_st.index.at(p);
    if (o.state != RowState::kOwned || !o.holder) continue;
    const RowEntry* t = by_id ? st.index.find(o.id) : nullptr;
    if (t && t->state == RowState::kOwned && t->holder == o.holder) continue;
    o.holder->mark_rows_moved();
    src.move(src_st, o, Move{RowState::kFree}, src_ctx);
  }
  src.finish(src_st, src_ctx);  // offers nothing: it has a successor
  if (how == Adopt::kGiveBack) {
    src_st.took_over_from.reset();
    src_st.took_over_by_id = false;
    src_st.removed_since_take_over.clear();
  } else {
    st.took_over_from = src.weak_from_this();
    st.took_over_by_id = by_id;  // from now on removals here are logged for a give-back
    st.removed_since_take_over.clear();
  }
  return s;
}

void Table::restate(State& st, RowEntry& t, const State& src_st, const RowEntry& s, RowContext& ctx) {
  if (t.state == RowState::kClaimed) return;  // being removed here (MESSAGE_TTL)
  if (s.state == RowState::kOwned && s.holder) {
    if (t.state == RowState::kOwned && t.holder == s.holder && t.deliveries == s.deliveries) return;
    t.deliveries = s.deliveries;  // before the state: policies look at both
    Move m{RowState::kOwned, s.holder};
    m.more = true;  // it joins its holder's delivery as it stands (Leases::take_over)
    move(st, t, m, ctx);
    return;
  }
  // Queued there, or held there by a DELETE or MESSAGE_TTL (which this table applies itself).
  fmt::ReturnedRow theirs, ours;
  kept_due(src_st, s, &theirs);
  kept_due(st, t, &ours);
  if (queued(t.state) && t.deliveries == s.deliveries && ours.due_ms == theirs.due_ms) return;
  if (t.state == RowState::kDelayed) move(st, t, Move{RowState::kFree}, ctx);  // its deadline goes stale
  t.deliveries = s.deliveries;
  const uint64_t due = theirs.due_ms;
  const uint64_t now = ctx.wall_ms();
  requeue(st, t, std::chrono::milliseconds(due > now ? due - now : 0), ctx);
}

}  // namespace q4m
