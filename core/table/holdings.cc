// What holders do with the rows they hold: give them back (queue_abort, a disconnect), keep or
// give back a provisional hand-off (a waiter that took an earlier listed row instead), settle
// or renew their lease, and DELETE's claims. Their removal is a commit (writer.cc: end_rows,
// remove_claimed_rows). Once a copying ALTER TABLE moved the rows (takeover.cc), the owners'
// calls go on to the table that took them over, with no lock of this one held.
#include <algorithm>

#include "core/table/consumer.h"
#include "core/table/table.h"

namespace q4m {

size_t Table::abort_rows(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds delay) {
  std::vector<fmt::ReturnedRow> returned;
  std::shared_ptr<Table> next;
  {
    auto st = state_.lock();
    next = st->successor;
    if (!next) {
      RowContext ctx = context(*st);
      for (size_t i = 0; i < count; i++) {
        RowEntry* e = st->index.find(ids[i]);
        // Gone (TRUNCATE, DROP, a DELETE), or its lease ran out and it went back already.
        if (!e || e->holder != h || e->state != RowState::kOwned) continue;
        fmt::ReturnedRow r{e->id, e->deliveries, 0};
        requeue(*st, *e, delay, ctx);  // may hand it out at once: r was taken before
        if (e->state == RowState::kDelayed || e->state == RowState::kClaimed) kept_due(*st, *e, &r);
        returned.push_back(r);
      }
      st->policies.get<Leases>().let_go(h);
      finish(*st, ctx);
    }
  }
  if (next) return next->abort_rows(h, ids, count, delay);  // its rows moved there
  record_returns(returned);  // one record for a batch
  return returned.size();
}

void Table::keep_handed(const Holder* h, RowId id, std::chrono::milliseconds lease) {
  std::shared_ptr<Table> next;
  {
    auto st = state_.lock();
    next = st->successor;
    if (!next) {
      RowEntry* e = st->index.find(id);
      if (!e || e->holder != h || e->state != RowState::kOwned) return;  // gone: its owner learns it as usual
      RowContext ctx = context(*st);
      handed_out(*e, ctx);
      if (lease.count() > 0) st->policies.get<Leases>().renew(h, &id, 1, lease, st->index, ctx);
      finish(*st, ctx);
      return;
    }
  }
  next->keep_handed(h, id, lease);  // its row moved there
}

void Table::give_back(const Holder* h, RowId id, uint32_t deliveries) {
  std::shared_ptr<Table> next;
  {
    auto st = state_.lock();
    next = st->successor;
    if (!next) {
      RowEntry* e = st->index.find(id);
      if (!e || e->holder != h || e->state != RowState::kOwned) return;  // gone (TRUNCATE, DROP, released)
      RowContext ctx = context(*st);
      e->deliveries = static_cast<uint16_t>(deliveries);  // as before the hand-off: nothing to record
      requeue(*st, *e, std::chrono::milliseconds(0), ctx);
      finish(*st, ctx);
      return;
    }
  }
  next->give_back(h, id, deliveries);  // its row moved there
}

Status revoked_status(const Holder& h, RowId first, size_t count) {
  const std::string what = count > 1 ? "the batch of " + std::to_string(count) + " rows from row " + std::to_string(first)
                                     : "row " + std::to_string(first);
  return Status(ErrorCode::kLeaseExpired,
                what + " was given back to the queue by connection " + std::to_string(h.revoked_by()) +
                    " (queue_release_owned()) before it was ended: " +
                    (count > 1 ? "its rows went back to the queue and were not removed"
                               : "the row went back to the queue and was not removed"));
}

void Table::kept_due(const State& st, const RowEntry& e, fmt::ReturnedRow* r) const {
  fmt::ReturnedRow kept;
  kept_across_restart(st, e, &kept);
  r->due_ms = kept.due_ms;
}

void Table::record_returns(const std::vector<fmt::ReturnedRow>& rows) {
  if (rows.empty()) return;
  CommitRequest req;
  req.batch.returns = rows.data();
  req.batch.return_count = rows.size();
  req.batch.sync = false;
  // A failure (table closed, dropped or its file broken) loses only the count and delay
  // across a restart, as it did before RETURN records existed; the row itself is queued.
  if (commit(&req).ok()) global_stats().returns_recorded.add(rows.size());
}

Status Table::settle_lease(const Holder* h, RowId first, size_t count) {
  std::shared_ptr<Table> next;
  {
    auto st = state_.lock();
    next = st->successor;
    if (!next) return st->policies.get<Leases>().settle(h, first, count);
  }
  return next->settle_lease(h, first, count);  // its rows moved there
}

Status Table::renew_lease(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds lease) {
  std::shared_ptr<Table> next;
  {
    auto st = state_.lock();
    next = st->successor;
    if (!next) {
      RowContext ctx = context(*st);
      Status s = st->policies.get<Leases>().renew(h, ids, count, lease, st->index, ctx);
      finish(*st, ctx);
      return s;
    }
  }
  return next->renew_lease(h, ids, count, lease);  // its rows moved there
}

bool Table::claim_for_delete(Consumer* viewer, RowId id, const Holder* as, NamedRow* named) {
  const View v = viewer ? viewer->view() : View();
  const Holder* claimer = as ? as : v.holder;
  if (v.sees_nothing_in(this)) return false;  // everything here is invisible to it
  {
    auto st = state_.lock();
    RowEntry* e = st->index.find(id);
    if (!e || st->successor) return false;
    if (e->state == RowState::kClaimed && (e->holder == claimer || e->holder == v.holder)) return e->holder == claimer;
    const bool owned_by_viewer = v.holder && e->state == RowState::kOwned && e->holder == v.holder;
    if (v.owned_in && !owned_by_viewer) return false;  // in owner mode only the owned row is visible
    if (!queued(e->state) && !owned_by_viewer) return false;
    if (named && !name_row(*st, *e, named).ok()) return false;
    RowContext ctx = context(*st);
    Move m{RowState::kClaimed, claimer};
    m.ends_as = EndKind::kDeleted;
    if (named) name_end(*st, *e, EndKind::kDeleted, named);
    move(*st, *e, m, ctx);
    finish(*st, ctx);
  }
  if (viewer && !as) viewer->claimed_in(weak_from_this());  // a transaction gives back its own
  return true;
}

Status Table::remove_claimed(Consumer* viewer) {
  size_t removed = 0;
  return remove_claimed_rows(viewer ? &viewer->holder() : nullptr, &removed);
}

void Table::release_claims(const Holder* h, const RowId* only, size_t count) {
  std::vector<fmt::ReturnedRow> returned;
  {
    auto st = state_.lock();
    auto it = st->claims.find(h);
    if (it == st->claims.end()) return;
    std::vector<RowId> ids;
    if (only) {  // these go back; the rest stay claimed
      ids.assign(only, only + count);
      std::vector<RowId>& kept = it->second;
      kept.erase(std::remove_if(kept.begin(), kept.end(),
                                [&](RowId id) { return std::find(only, only + count, id) != only + count; }),
                 kept.end());
      if (kept.empty()) st->claims.erase(it);
    } else {
      ids = std::move(it->second);
      st->claims.erase(it);
    }
    RowContext ctx = context(*st);
    for (RowId id : ids) {
      RowEntry* e = st->index.find(id);
      if (!e || e->state != RowState::kClaimed || e->holder != h) continue;
      // Deliveries that ended without a removal are what a RETURN record keeps.
      if (e->deliveries > 0) returned.push_back(fmt::ReturnedRow{e->id, e->deliveries, 0});
      requeue(*st, *e, std::chrono::milliseconds(0), ctx);
    }
    finish(*st, ctx);
  }
  record_returns(returned);
}

Status Table::claim_owned(const Holder* owner, const RowId* ids, size_t count, const Holder* as,
                          std::vector<NamedRow>* named, bool frees_slot) {
  if (owner->revoked_by()) return revoked_status(*owner, ids[0], count);
  auto st = state_.lock();
  // Its rows are owned in the table that took this one over (a copying ALTER TABLE); here
  // they are gone with the dropped table: claiming nothing would report a false end.
  if (st->successor) return moved_status();
  std::vector<RowEntry*> rows;
  for (size_t i = 0; i < count; i++) {
    RowEntry* e = st->index.find(ids[i]);
    if (!e || e->state != RowState::kOwned || e->holder != owner) continue;  // gone (TRUNCATE, DROP)
    rows.push_back(e);
    if (!named) continue;
    NamedRow r;
    Status s = name_row(*st, *e, &r);
    if (!s.ok()) return s;
    name_end(*st, *e, EndKind::kConsumed, &r);
    named->push_back(r);
  }
  Status s = st->policies.get<Leases>().settle(owner, ids[0], count);  // the lease can no longer run out
  if (!s.ok()) {
    if (named) named->clear();
    return s;
  }
  RowContext ctx = context(*st);
  Move m{RowState::kClaimed, as};
  m.frees_slot = frees_slot;
  for (RowEntry* e : rows) move(*st, *e, m, ctx);
  finish(*st, ctx);
  return Status::Ok();
}

Status Table::claim_named(const NamedRow* rows, size_t count, const Holder* as) {
  const bool expires = options()->message_ttl.count() > 0;
  auto st = state_.lock();
  if (st->successor) return Status(ErrorCode::kMoved, "the table's rows moved to the table ALTER TABLE built");
  // Rows this server's timer claimed for its own expiry (a replica looks at its appliers once
  // a second, so it may still expire just after START SLAVE): the removal logged by the
  // primary takes them; the expiry skips a row no longer its own.
  const Holder* expiry = st->policies.get<Expiry>().claimer();
  std::vector<RowEntry*> here;  // all or nothing: check every row first
  for (size_t i = 0; i < count; i++) {
    RowEntry* e = st->index.find(rows[i].id);
    const std::string row = "row " + std::to_string(rows[i].id);
    if (!e && expires && rows[i].id < next_rowid_.load()) continue;
    if (!e) return Status(ErrorCode::kNotFound, row + ": no such row here");
    const bool expiring = e->state == RowState::kClaimed && e->holder == expiry;
    if (!queued(e->state) && !expiring) return Status(ErrorCode::kInvalid, row + ": held by a connection here");
    NamedRow named;
    Status s = name_row(*st, *e, &named);
    if (!s.ok()) return s;
    if (named.length != rows[i].length || named.checksum != rows[i].checksum)
      return Status(ErrorCode::kInvalid, row + ": other bytes here (" + std::to_string(named.length) + " bytes, checksum " +
                                             std::to_string(named.checksum) + ") than where it was removed (" +
                                             std::to_string(rows[i].length) + " bytes, checksum " +
                                             std::to_string(rows[i].checksum) + ")");
    here.push_back(e);
  }
  RowContext ctx = context(*st);
  for (size_t i = 0, k = 0; i < count && k < here.size(); i++) {
    RowEntry* e = here[k];
    if (e->id != rows[i].id) continue;  // (expired here already)
    k++;
    Move m{RowState::kClaimed, as};
    m.ends_as = static_cast<EndKind>(rows[i].end_kind);  // as its primary ended it (history)
    move(*st, *e, m, ctx);
    if (st->history_ms && rows[i].end_kind) st->ended.mark(e->id, m.ends_as, rows[i].deliveries);
  }
  finish(*st, ctx);
  return Status::Ok();
}

Status Table::claim_dead_rows(size_t max, const Holder* as, std::vector<NamedRow>* named, bool copyable) {
  auto st = state_.lock();
  if (st->dropped) return dropped_status();
  std::vector<RowEntry*> rows;
  for (RowId id : st->policies.get<DeadLetters>().oldest(max, copyable)) {
    RowEntry* e = st->index.find(id);  // the dead-letter list holds live rows only
    NamedRow r;
    Status s = name_row(*st, *e, &r);
    if (!s.ok()) return s;
    name_end(*st, *e, copyable ? EndKind::kRedriven : EndKind::kPurged, &r);
    named->push_back(r);
    rows.push_back(e);
  }
  RowContext ctx = context(*st);
  Move m{RowState::kClaimed, as};
  m.ends_as = copyable ? EndKind::kRedriven : EndKind::kPurged;  // copyable: a redrive's
  for (RowEntry* e : rows) move(*st, *e, m, ctx);
  finish(*st, ctx);
  return Status::Ok();
}

Status Table::claim_expired_rows(const Holder* as, size_t max, std::vector<NamedRow>* named) {
  std::vector<RowId> ids;
  std::vector<NamedRow> ends;  // how each ends, if the table keeps history
  {
    auto st = state_.lock();
    if (st->dropped) return dropped_status();
    const Holder* expiry = st->policies.get<Expiry>().claimer();
    auto it = st->claims.find(expiry);
    if (it == st->claims.end()) return Status::Ok();
    std::vector<RowId>& claimed = it->second;  // in claim order: oldest first
    size_t taken = 0;
    RowContext ctx = context(*st);
    for (; taken < claimed.size() && ids.size() < max; taken++) {
      RowEntry* e = st->index.find(claimed[taken]);
      if (!e || e->state != RowState::kClaimed || e->holder != expiry) continue;
      move(*st, *e, Move{RowState::kClaimed, as}, ctx);
      ids.push_back(e->id);
      ends.push_back(NamedRow{e->id, 0, 0});
      name_end(*st, *e, EndKind::kExpired, &ends.back());
    }
    claimed.erase(claimed.begin(), claimed.begin() + static_cast<std::ptrdiff_t>(taken));
    if (claimed.empty()) st->claims.erase(it);
    finish(*st, ctx);
  }
  // Their bytes are read (for the names' checksums) without the table's lock: with thousands
  // of rows, consumers would wait meanwhile.
  for (size_t i = 0; i < ids.size(); i++) {
    const RowId id = ids[i];
    std::string payload;
    bool found = false;
    Status s = read(id, &payload, &found, as);
    if (!s.ok()) {  // they go back, where the expiry claims them again
      named->clear();
      release_claims(as, ids.data(), ids.size());
      return s;
    }
    if (!found) continue;
    NamedRow r = ends[i];
    r.length = static_cast<uint32_t>(payload.size());
    r.checksum = fmt::row_checksum(id, payload);
    named->push_back(r);
  }
  return Status::Ok();
}

Status Table::copy_claimed(const Holder* as, const std::vector<NamedRow>& rows, std::vector<RowCopy>* out) {
  out->clear();
  for (const NamedRow& r : rows) {
    RowCopy copy;
    {
      auto st = state_.lock();
      const RowEntry* e = st->index.find(r.id);
      if (!e || e->state != RowState::kClaimed || e->holder != as)
        return Status(ErrorCode::kNotFound, "row " + std::to_string(r.id) + ": not claimed for the copy");
      copy.insert_time_ms = e->time_ms;
    }
    bool found = false;
    Status s = read(r.id, &copy.payload, &found, as);  // checked: a damaged row fails the copy
    if (!s.ok()) return s;
    if (!found) return Status(ErrorCode::kNotFound, "row " + std::to_string(r.id) + ": gone");
    out->push_back(std::move(copy));
  }
  return Status::Ok();
}

Status Table::name_row(const State& st, const RowEntry& e, NamedRow* out) const {
  std::string payload;
  Status s = st.read_here(st.locate(e), &payload);
  if (!s.ok()) return s;
  *out = NamedRow{e.id, e.length, fmt::row_checksum(e.id, payload)};
  return Status::Ok();
}

}  // namespace q4m
