// MAX_DELIVERIES: a row handed out that many times that comes back to the queue is dead (SQS's
// redrive to a dead-letter queue, kept inside the table so that the move is atomic): it stays
// visible and deletable, and only queue_take_dead() hands it out. Dying happens where every
// returning row passes (row_became_free, and abort_row for a delayed abort); the delivery
// count it follows from is in the file (RETURN records), so set_max_deliveries() at open
// finds the dead rows again after a restart.
#include "consumer_impl.h"
#include "queue_table_impl.h"

namespace q4m {

void QueueTableImpl::set_max_deliveries(uint32_t max) {
  auto st = state_.lock();
  if (st->max_deliveries == max || st->dropped) return;
  st->max_deliveries = max;
  // Sorts every queued row again (O(rows), at open and at an ALTER that changes the limit).
  for (size_t pos = 0, end = st->index.end_pos(); pos < end; pos++) {
    RowEntry& e = st->index.at(pos);
    if (e.state == RowState::kDead) {
      if (!st->dies(e)) row_became_free(*st, e);  // back in the queue, perhaps to a waiter
    } else if ((e.state == RowState::kFree || e.state == RowState::kDelayed) && st->dies(e)) {
      if (e.state == RowState::kDelayed) st->delay_tokens.erase(e.id);  // its deadline goes stale
      set_state(*st, e, RowState::kDead);
      count_dead_letter();
    }
  }
  // An owned row may have crossed the new limit either way (in line or lent out).
  if (st->message_group) st->groups.refresh_all(group_lookup(*st));
  release_ready(*st);  // rows behind a row that died may go now
}

QueueTableImpl::Take QueueTableImpl::take_dead(Consumer::Impl& c) {
  auto st = state_.lock();
  if (st->dropped) return Take::kDropped;
  if (st->dead_ids.empty()) return Take::kNone;
  RowEntry* e = st->index.find(*st->dead_ids.begin());
  // (set_state keeps dead_ids exact; the check is a guard against ever handing out a held row)
  return e && e->state == RowState::kDead ? take_locked(*st, c, 0, *e) : Take::kNone;
}

}  // namespace q4m

namespace q4m {

namespace {

// Up to `max` dead rows of `st`, oldest first, claimed by `claimer` (hidden from everyone,
// as a DELETE's claim): the caller removes them or gives them back.
struct ClaimedDead {
  RowId id;
  uint64_t time_ms;
};

}  // namespace

Status QueueTableImpl::purge_dead(size_t max, size_t* purged) {
  *purged = 0;
  Consumer claimer;  // synced removals (its default)
  {
    auto st = state_.lock();
    if (st->dropped) return dropped_status();
    std::vector<RowId> ids;
    for (auto it = st->dead_ids.begin(); it != st->dead_ids.end() && ids.size() < max; ++it) ids.push_back(*it);
    for (RowId id : ids) claim_row(*st, *st->index.find(id), &claimer);  // dead_ids holds live rows only
  }
  Status s = remove_claimed_rows(&claimer, purged);  // a failure gives them back (dead again)
  counters_.rows_purged.add(*purged);
  global_stats().rows_purged.add(*purged);
  return s;
}

Status QueueTableImpl::redrive_dead(size_t max, size_t* moved) {
  *moved = 0;
  constexpr size_t kSlice = 1000;  // rows per commit: bounds the payloads held in memory
  while (*moved < max) {
    Consumer claimer;
    std::vector<ClaimedDead> rows;
    {
      auto st = state_.lock();
      if (st->dropped) return dropped_status();
      for (auto it = st->dead_ids.begin(); it != st->dead_ids.end() && rows.size() < std::min(kSlice, max - *moved);
           ++it)
        rows.push_back(ClaimedDead{*it, st->index.find(*it)->time_ms});
      for (const ClaimedDead& r : rows) claim_row(*st, *st->index.find(r.id), &claimer);
    }
    if (rows.empty()) break;
    std::vector<std::string> payloads(rows.size());
    std::vector<std::string_view> views;
    std::vector<RowHistory> history;
    std::vector<RowId> ids;
    Status s;
    for (size_t i = 0; i < rows.size() && s.ok(); i++) {
      bool found = false;
      s = read_row(rows[i].id, &payloads[i], &found);  // claimed: nobody removes it meanwhile
      views.push_back(payloads[i]);
      history.push_back(RowHistory{rows[i].time_ms, 0, 0});  // its age kept, its deliveries over
      ids.push_back(rows[i].id);
    }
    if (s.ok()) {
      CommitRequest req;
      req.kind = CommitRequest::kInsert;
      req.rows = &views;
      req.history = history.data();
      req.remove_ids = ids.data();
      req.remove_count = ids.size();
      req.remover = &claimer;
      commit(&req);
      s = req.status;
    }
    if (!s.ok()) {  // nothing was written: the rows are dead again
      release_claims(&claimer);
      return s;
    }
    {
      auto st = state_.lock();
      st->claims.erase(&claimer);  // its rows are gone
    }
    *moved += rows.size();
    counters_.rows_redriven.add(rows.size());
    global_stats().rows_redriven.add(rows.size());
  }
  return Status::Ok();
}

}  // namespace q4m
