// What an operator (the dashboard, or a DBA) does to a table's rows: give back the rows a
// connection owns, put dead rows back in the queue, or remove them.
#include "core/table/consumer.h"
#include "core/table/table.h"

namespace q4m {

Status Table::release_owned(RowId id, uint64_t by_connection, size_t* released) {
  *released = 0;
  std::vector<fmt::ReturnedRow> returned;
  for (;;) {
    // The rows moved there (takeover.cc); no lock of this table is held on the way.
    if (std::shared_ptr<Table> next = successor()) return next->release_owned(id, by_connection, released);
    // With the writer turn held no removal is being committed: an end() of these rows was
    // either published before (they are gone) or is refused after (the leader checks the
    // owner's Holder::revoked_by, set here).
    CommitPipeline::Turn turn(pipeline_);
    auto st = state_.lock();
    if (st->successor) continue;  // taken over meanwhile
    if (st->dropped) return dropped_status();
    RowEntry* e = st->index.find(id);
    if (!e || e->state != RowState::kOwned || !e->holder) return Status::Ok();
    const Holder* owner = e->holder;
    owner->revoke(by_connection);
    // Its other rows here (a batch). Held rows sit at the front of the index: the walk stops
    // once it has met as many as the table counts.
    std::vector<RowId> rows;
    uint64_t seen = 0;
    const uint64_t held_rows = held_.load();
    for (size_t pos = 0, end = st->index.end_pos(); pos < end && seen < held_rows; pos++) {
      const RowEntry& r = st->index.at(pos);
      if (!held(r.state)) continue;
      seen++;
      if (r.state == RowState::kOwned && r.holder == owner) rows.push_back(r.id);
    }
    RowContext ctx = context(*st);
    for (RowId rid : rows) {
      RowEntry* r = st->index.find(rid);
      returned.push_back(fmt::ReturnedRow{r->id, r->deliveries, 0});
      requeue(*st, *r, std::chrono::milliseconds(0), ctx);
    }
    st->policies.get<Leases>().let_go(owner);
    finish(*st, ctx);
    break;
  }
  record_returns(returned);  // after the writer turn: it commits
  *released = returned.size();
  counters_.rows_released.add(returned.size());
  global_stats().rows_released.add(returned.size());
  return Status::Ok();
}

std::vector<RowId> Table::claim_dead(const Holder* claimer, size_t max, std::vector<uint64_t>* times, Status* dropped,
                                     bool copyable) {
  auto st = state_.lock();
  if (st->dropped) {
    *dropped = dropped_status();
    return {};
  }
  std::vector<RowId> ids = st->policies.get<DeadLetters>().oldest(max, copyable);
  RowContext ctx = context(*st);
  for (RowId id : ids) {
    RowEntry* e = st->index.find(id);  // the dead-letter list holds live rows only
    if (times) times->push_back(e->time_ms);
    Move m{RowState::kClaimed, claimer};
    m.ends_as = times ? EndKind::kRedriven : EndKind::kPurged;  // times: a redrive's
    move(*st, *e, m, ctx);
  }
  finish(*st, ctx);
  return ids;
}

Status Table::purge_dead(size_t max, size_t* purged) {
  *purged = 0;
  Holder claimer;  // synced removals (its default)
  Status s;
  if (claim_dead(&claimer, max, nullptr, &s).empty()) return s;
  s = remove_claimed_rows(&claimer, purged);  // a failure gives them back (dead again)
  counters_.rows_purged.add(*purged);
  global_stats().rows_purged.add(*purged);
  return s;
}

Status Table::redrive_dead(size_t max, size_t* moved) {
  *moved = 0;
  constexpr size_t kSlice = 1000;  // rows per commit: bounds the payloads held in memory
  while (*moved < max) {
    Holder claimer;
    std::vector<uint64_t> times;
    Status s;
    // Not the rows set aside for damaged bytes: they cannot be copied.
    const std::vector<RowId> ids = claim_dead(&claimer, std::min(kSlice, max - *moved), &times, &s, true);
    if (!s.ok()) return s;
    if (ids.empty()) break;
    std::vector<std::string> payloads(ids.size());
    std::vector<std::string_view> views;
    std::vector<RowHistory> history;
    for (size_t i = 0; i < ids.size() && s.ok(); i++) {
      bool found = false;
      // Claimed: nobody removes it meanwhile. A row found damaged now is set aside as such
      // (the claimer reads it), and the redrive fails naming it; the next one leaves it.
      s = read(ids[i], &payloads[i], &found, &claimer);
      views.push_back(payloads[i]);
      history.push_back(RowHistory{times[i], 0, 0});  // its age kept, its deliveries over
    }
    if (s.ok()) {
      CommitRequest req;
      req.batch.rows = &views;
      req.batch.history = history.data();
      req.batch.removals = ids.data();  // the same chunk as the copies: atomic
      req.batch.removal_count = ids.size();
      req.batch.remover = &claimer;
      s = commit(&req);
    }
    if (!s.ok()) {  // nothing was written: the rows are dead again
      release_claims(&claimer);
      return s;
    }
    state_.lock()->claims.erase(&claimer);  // its rows are gone
    *moved += ids.size();
    counters_.rows_redriven.add(ids.size());
    global_stats().rows_redriven.add(ids.size());
  }
  return Status::Ok();
}

QueueTable::RowView Table::row_view(RowId id, const Consumer* viewer) {
  auto st = state_.lock();
  const RowEntry* e = st->index.find(id);
  if (!e) return RowView::kGone;
  switch (e->state) {
    case RowState::kFree: return RowView::kQueued;
    case RowState::kDelayed: return RowView::kDelayed;
    case RowState::kDead: return RowView::kDead;
    case RowState::kOwned: return viewer && e->holder == &viewer->holder() ? RowView::kOwnedByViewer : RowView::kHeld;
    case RowState::kClaimed: return RowView::kHeld;
    case RowState::kRemoved: return RowView::kGone;
  }
  return RowView::kGone;
}

}  // namespace q4m
