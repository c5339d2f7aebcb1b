// Row ownership inside one table: consumers taking rows, waiters being handed rows,
// rows returning to the queue, delete claims.
#include "consumer_impl.h"
#include "queue_table_impl.h"

namespace q4m {

namespace {

// The delivery count a row has once handed out again (saturating at the field's limit).
uint32_t next_delivery(const RowEntry& e) {
  return e.deliveries == UINT16_MAX ? e.deliveries : e.deliveries + 1u;
}

}  // namespace

// Hands a Free row to the first waiter (FIFO) that still waits and whose filter matches.
void QueueTableImpl::offer_row(TableState& st, RowEntry& e, std::string_view payload) {
  if (st.waiters.empty() || !st.takeable(e)) return;
  std::string scratch;
  bool have_payload = payload.data() != nullptr || e.length == 0;  // (a caller's payload is one it wrote: no check)
  for (auto it = st.waiters.begin(); it != st.waiters.end();) {
    if (it->filter) {
      if (!have_payload) {
        const Status s = st.read_here(st.locate(e), &scratch);
        if (s.code() == ErrorCode::kDamaged) set_aside_damaged(st, e.id, nullptr);
        if (!s.ok()) return;
        payload = scratch;
        have_payload = true;
      }
      if (!it->filter->matches(payload)) {
        ++it;
        continue;
      }
    }
    Consumer::Impl* c = it->consumer;
    const uint32_t deliveries = next_delivery(e);
    if (!c->accept(it->sub_index, e.id, deliveries)) {  // done waiting (timed out / got a row elsewhere)
      it = st.waiters.erase(it);
      continue;
    }
    give_row(st, *c, e, deliveries);
    st.waiters.erase(it);
    waiters_.store(st.waiters.size());
    counters_.handoffs.add();
    global_stats().wait_handoff.add();
    return;
  }
  waiters_.store(st.waiters.size());
}

void QueueTableImpl::count_state_change(RowState from, RowState to) {
  // One net change per mirror, so a lock-free reader never sees a transient count.
  const int owned = int{held_by_connection(to)} - int{held_by_connection(from)};
  const int delayed = int{to == RowState::kDelayed} - int{from == RowState::kDelayed};
  if (owned > 0) owned_.fetch_add(1);
  if (owned < 0) owned_.fetch_sub(1);
  if (delayed > 0) delayed_.fetch_add(1);
  if (delayed < 0) delayed_.fetch_sub(1);
}

void QueueTableImpl::row_became_free(TableState& st, RowEntry& e) {
  if (st.ttl_ms != 0 && claim_if_expired(st, e, now_ms())) {
    watch_deadline(LeaseClock::now());  // the reaper's next pass removes it (remove_expired)
    return;
  }
  e.owner = nullptr;
  if (st.dies(e)) {
    set_state(st, e, RowState::kDead);
    release_ready(st);  // the next row of its message group may go
    return;
  }
  st.free_epoch++;  // filtered scans in progress must not move their cursor past it
  set_state(st, e, RowState::kFree);
  // Scans skipped this row while it was taken: move their cursors back. (The unfiltered
  // scan skips grouped rows: it finds them among the groups' ready rows.)
  if (!e.grouped && st.first_free_hint > e.id) st.first_free_hint = e.id;
  st.cursors.row_returned(e.id);
  offer_row(st, e, std::string_view());
  release_ready(st);
}

uint64_t QueueTableImpl::delay_row(TableState& st, RowEntry& e, std::chrono::milliseconds delay, DelayKind kind) {
  e.owner = nullptr;
  set_state(st, e, RowState::kDelayed);
  // Deadlines of delayed rows that were deleted meanwhile stay until due: prune them once
  // they outnumber the delayed rows by far.
  if (st.delays.size() >= 2 * delayed_.load() + 1024)
    st.delays.drop_stale([&](const LeaseDeadline& d) { return st.delay_is_live(d); });
  const uint64_t token = next_lease_token();
  const LeaseClock::time_point at = LeaseClock::now() + delay;
  const uint64_t due_ms = now_ms() + static_cast<uint64_t>(delay.count());
  st.delay_tokens[e.id] = TableState::DelayToken{token, due_ms, kind == DelayKind::kRetry};
  st.delays.push(LeaseDeadline{at, e.id, token});
  watch_deadline(at);
  return due_ms;
}

void QueueTableImpl::queue_row(TableState& st, RowEntry& e, std::string_view payload, int64_t now) {
  const int64_t at = st.visible_at ? visible_at_ms(*st.visible_at, payload) : 0;
  if (at > now)
    delay_row(st, e, std::chrono::milliseconds(at - now), DelayKind::kVisibleAt);
  else
    offer_row(st, e, payload);
}

bool QueueTableImpl::queue_copied_row(TableState& st, RowEntry& e, const RowHistory& history, uint64_t now) {
  e.deliveries = static_cast<uint16_t>(std::min<uint32_t>(history.deliveries, UINT16_MAX));  // saturates, as counted
  if (st.dies(e)) {
    set_state(st, e, RowState::kDead);
    return true;
  }
  if (history.due_ms <= now) return false;
  delay_row(st, e, std::chrono::milliseconds(history.due_ms - now), DelayKind::kRetry);
  return true;
}

void QueueTableImpl::set_visible_at(std::shared_ptr<const VisibleAtColumn> column) {
  auto st = state_.lock();
  if (st->visible_at || !column || !st->file) return;
  st->visible_at = std::move(column);
  // The rows queued already (this runs when a statement first opens the table, before
  // anyone can take a row).
  const int64_t now = static_cast<int64_t>(now_ms());
  std::vector<RowId> damaged;
  st->for_each_payload(
      [](const RowEntry& e) { return e.state == RowState::kFree; },
      [&](RowEntry& e, std::string_view payload) {
        const int64_t at = visible_at_ms(*st->visible_at, payload);
        if (at > now) delay_row(*st, e, std::chrono::milliseconds(at - now), DelayKind::kVisibleAt);
      },
      &damaged);
  for (RowId id : damaged) set_aside_damaged(*st, id, nullptr);
}

void QueueTableImpl::claim_row(TableState& st, RowEntry& e, const Consumer* claimer) {
  e.owner = claimer;
  set_state(st, e, RowState::kClaimedForDelete);
  st.claims[claimer].push_back(e.id);
}

void QueueTableImpl::unclaim(TableState& st, RowEntry& e) {
  if (st.delay_tokens.count(e.id)) {  // its deadline is still ahead: it returns then
    e.owner = nullptr;
    set_state(st, e, RowState::kDelayed);
    return;
  }
  row_became_free(st, e);
}

void QueueTableImpl::watch_deadline(LeaseClock::time_point at) {
  if (!lease_watched_.exchange(true)) LeaseReaper::instance().watch(weak_from_this());
  LeaseReaper::instance().deadline_added(at);
}

RowId* QueueTableImpl::cursor_for(TableState& st, const std::shared_ptr<const RowFilter>& filter) {
  return filter ? st.cursors.cursor_for(filter) : &st.first_free_hint;
}

QueueTableImpl::Take QueueTableImpl::take_locked(TableState& st, Consumer::Impl& c, int sub_index, RowEntry& e) {
  // A batch stops growing once its lease ran out (its rows are going back already).
  if (c.taking_more && c.lease_expired.load()) return Take::kConsumerDone;
  const uint32_t deliveries = next_delivery(e);
  if (!c.accept(sub_index, e.id, deliveries)) return Take::kConsumerDone;  // got a row elsewhere meanwhile
  give_row(st, c, e, deliveries);
  global_stats().wait_immediate.add();
  return Take::kTaken;
}

void QueueTableImpl::give_row(TableState& st, const Consumer::Impl& c, RowEntry& e, uint32_t deliveries) {
  e.owner = c.self;
  e.deliveries = static_cast<uint16_t>(deliveries);  // before the state: its group looks at both
  set_state(st, e, RowState::kOwned);
  if (!c.taking_more) c.owned_since.store(LeaseClock::now().time_since_epoch().count(), std::memory_order_relaxed);
  // c is out of owner mode (its lease token and expired flag are clear, leave_owner_mode),
  // or adding to a batch, whose rows share the first one's lease.
  if (const int64_t ms = c.lease_ms.load(); ms > 0) {
    if (c.taking_more)
      add_to_lease(st, c, e.id);
    else
      lease_row(st, c, e.id, ms);
  }
}

namespace {

// The owned row `d` is still the lease of, or null if that lease is over (the row was
// ended, aborted or removed, or its lease renewed or expired already).
// A deadline of the lease that just expired is live too: the other rows of its batch.
RowEntry* leased_row(RowIndex& index, const LeaseDeadline& d) {
  RowEntry* e = index.find(d.id);
  if (!e || e->state != RowState::kOwned || !e->owner) return nullptr;
  const Consumer::Impl& owner = e->owner->impl();
  return owner.lease_token.load() == d.token || owner.expired_token.load() == d.token ? e : nullptr;
}

std::string seconds_text(int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000) {
    std::string frac = std::to_string(1000 + ms % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + " s";
}

}  // namespace

void QueueTableImpl::lease_row(TableState& st, const Consumer::Impl& c, RowId id, int64_t ms) {
  const uint64_t token = next_lease_token();
  const LeaseClock::time_point at = LeaseClock::now() + std::chrono::milliseconds(ms);
  c.owned_lease_ms.store(ms);
  c.lease_at.store(at.time_since_epoch().count());
  c.lease_token.store(token);
  // Leases ended in time leave their deadlines behind: drop them once they outnumber
  // the rows that can hold a lease (at most the owned ones) by far.
  if (st.leases.size() >= 2 * owned_.load() + 1024)
    st.leases.drop_stale([&](const LeaseDeadline& d) { return leased_row(st.index, d) != nullptr; });
  st.leases.push(LeaseDeadline{at, id, token});
  watch_deadline(at);
}

void QueueTableImpl::add_to_lease(TableState& st, const Consumer::Impl& c, RowId id) {
  const uint64_t token = c.lease_token.load();
  if (token == 0) return;  // expired: take_locked adds no row then
  st.leases.push(LeaseDeadline{LeaseClock::time_point(LeaseClock::duration(c.lease_at.load())), id, token});
}

namespace {

Status lease_expired_status(const Consumer::Impl& c, RowId first, size_t count) {
  const std::string lease = " (" + seconds_text(c.owned_lease_ms.load()) + ") ran out before ";
  if (count > 1)
    return Status(ErrorCode::kLeaseExpired,
                  "the lease of the batch of " + std::to_string(count) + " rows from row " + std::to_string(first) +
                      lease + "it was ended: its rows went back to the queue and were not removed");
  return Status(ErrorCode::kLeaseExpired, "the lease of row " + std::to_string(first) + lease +
                                              "it was ended: the row went back to the queue and was not removed");
}

}  // namespace

Status QueueTableImpl::settle_lease(const Consumer::Impl& c, RowId first, size_t count) {
  auto st = state_.lock();
  if (c.lease_expired.load()) return lease_expired_status(c, first, count);
  c.lease_token.store(0);  // its deadlines are stale from here on
  return Status::Ok();
}

Status QueueTableImpl::renew_lease(const Consumer::Impl& c, const RowId* ids, size_t count,
                                   std::chrono::milliseconds lease) {
  auto st = state_.lock();
  if (c.lease_expired.load()) return lease_expired_status(c, ids[0], count);
  bool leased = false;  // the first row still held gets a new token (old deadlines go stale)
  for (size_t i = 0; i < count; i++) {
    const RowEntry* e = st->index.find(ids[i]);
    if (!e || e->owner != c.self || e->state != RowState::kOwned) continue;  // gone (TRUNCATE, DELETE)
    if (leased) {
      add_to_lease(*st, c, ids[i]);
    } else {
      lease_row(*st, c, ids[i], lease.count());
      leased = true;
    }
  }
  return Status::Ok();
}

LeaseClock::time_point QueueTableImpl::expire_leases(LeaseClock::time_point now) {
  std::vector<fmt::ReturnedRow> returned;
  const LeaseClock::time_point next = expire_due(now, &returned);
  record_returns(returned);  // after the state lock: a commit takes the writer's first
  remove_expired();
  return next;
}

LeaseClock::time_point QueueTableImpl::expire_due(LeaseClock::time_point now, std::vector<fmt::ReturnedRow>* returned) {
  auto st = state_.lock();
  while (st->leases.due(now)) {
    const LeaseDeadline d = st->leases.pop();
    RowEntry* e = leased_row(st->index, d);
    if (!e) continue;
    const Consumer::Impl& owner = e->owner->impl();
    if (owner.lease_token.load() == d.token) owner.expired_token.store(d.token);  // the rest of its batch
    owner.lease_expired.store(true);  // before the token: see consumer_impl.h
    owner.lease_token.store(0);
    counters_.lease_expiries.add();
    global_stats().lease_expiries.add();
    returned->push_back(fmt::ReturnedRow{e->id, e->deliveries, 0});
    row_became_free(*st, *e);
  }
  while (st->delays.due(now)) {
    const LeaseDeadline d = st->delays.pop();
    if (!st->delay_is_live(d)) continue;  // the row was removed, or delayed again since
    st->delay_tokens.erase(d.id);
    RowEntry* e = st->index.find(d.id);
    if (e && e->state == RowState::kDelayed) row_became_free(*st, *e);  // else deleted, or claimed for a DELETE
  }
  const LeaseClock::time_point ttl = st->ttl_ms != 0 ? claim_expired(*st, now) : LeaseClock::time_point::max();
  return std::min(std::min(st->leases.earliest(), st->delays.earliest()), ttl);
}

QueueTableImpl::Take QueueTableImpl::register_locked(TableState& st, Consumer::Impl& c, int sub_index,
                                                     const std::shared_ptr<const RowFilter>& filter) {
  {
    auto mb = c.mailbox.lock();
    if (!mb->waiting) return Take::kConsumerDone;
  }
  st.waiters.push_back(Waiter{&c, sub_index, filter});
  waiters_.store(st.waiters.size());
  return Take::kRegistered;
}

// The cursor of (table, filter) says: rows before it are not Free-and-matching. It only
// moves forward when no row became Free during the scan (free_epoch unchanged), and
// row_became_free() moves it back, so a returned row is never skipped.
QueueTableImpl::Take QueueTableImpl::take_or_register(Consumer::Impl& c, int sub_index,
                                                      const std::shared_ptr<const RowFilter>& filter,
                                                      bool register_waiter) {
  if (!filter) {  // no payload reads: one lock hold
    auto st = state_.lock();
    if (st->dropped) return Take::kDropped;
    RowId* cursor = cursor_for(*st, filter);
    size_t pos = st->index.lower_bound(*cursor), end = st->index.end_pos();
    // Grouped rows are not this scan's: the oldest one that may go is the groups' first ready row.
    while (pos < end && (st->index.at(pos).state != RowState::kFree || st->index.at(pos).grouped)) pos++;
    // (Not next_rowid_: rows with smaller ids may be durable but not yet published.)
    if (pos < end)
      *cursor = st->index.at(pos).id;
    else if (end > 0)
      *cursor = st->index.at(end - 1).id + 1;
    const RowId ready = st->groups.first_ready();
    if (ready != 0 && (pos == end || ready < st->index.at(pos).id)) {
      if (RowEntry* e = st->index.find(ready)) return take_locked(*st, c, sub_index, *e);
    }
    if (pos < end) return take_locked(*st, c, sub_index, st->index.at(pos));
    return register_waiter ? register_locked(*st, c, sub_index, filter) : Take::kNone;
  }

  // With a filter, payloads are read and evaluated in batches outside the lock.
  constexpr size_t kScanBatch = 256;
  struct Candidate {
    RowLocation row;
    size_t cached_at;  // position of its payload in `cached`, or kNotCached
  };
  constexpr size_t kNotCached = ~size_t(0);
  constexpr size_t kMaxCopiedUnderLock = 256u << 10;
  std::vector<Candidate> batch;
  std::vector<RowId> damaged;  // candidates whose bytes failed their checksum: set aside, never matched
  std::string cached, payload;
  RowId from = 0;
  uint64_t epoch = 0;
  bool started = false;
  for (;;) {
    std::shared_ptr<DataFile> file;
    {
      auto st = state_.lock();
      if (st->dropped) return Take::kDropped;
      RowId* cursor = cursor_for(*st, filter);
      if (!started || st->free_epoch != epoch) {  // (re)start: a row behind us may be Free again
        from = *cursor;
        epoch = st->free_epoch;
        started = true;
      }
      batch.clear();
      cached.clear();
      damaged.clear();
      size_t pos = st->index.lower_bound(from), end = st->index.end_pos();
      for (; pos < end && batch.size() < kScanBatch; pos++) {
        const RowEntry& e = st->index.at(pos);
        if (!st->takeable(e)) continue;
        // Payloads still in the tail cache are copied now (up to kMaxCopiedUnderLock in
        // all), the rest pread outside the lock.
        const RowLocation row = st->locate(e);
        size_t at = cached.size();
        Status s;
        if (at + e.length <= kMaxCopiedUnderLock && st->read_cached(row, &payload, &s)) {
          if (!s.ok()) {
            damaged.push_back(e.id);
            continue;
          }
          cached += payload;
        } else {
          at = kNotCached;
        }
        batch.push_back(Candidate{row, at});
      }
      for (RowId id : damaged) set_aside_damaged(*st, id, nullptr);  // (it was Free: not takeable any more)
      damaged.clear();
      if (batch.empty()) {  // checked up to the end, with no row freed meanwhile
        if (end > 0 && st->index.at(end - 1).id + 1 > *cursor) *cursor = st->index.at(end - 1).id + 1;
        return register_waiter ? register_locked(*st, c, sub_index, filter) : Take::kNone;
      }
      file = st->file;
    }
    RowId match = 0;
    for (const Candidate& k : batch) {
      std::string_view row;
      if (k.cached_at != kNotCached) {
        row = std::string_view(cached).substr(k.cached_at, k.row.length);
      } else {
        if (!file->read(k.row.offset, k.row.disk_length(), &payload).ok()) continue;  // unreadable: never matches
        if (!check_row(k.row, file->path(), payload.data()).ok()) {
          damaged.push_back(k.row.id);
          continue;
        }
        row = std::string_view(payload).substr(0, k.row.length);
      }
      if (filter->matches(row)) {
        match = k.row.id;
        break;
      }
    }
    auto st = state_.lock();
    if (st->dropped) return Take::kDropped;
    if (st->file == file)  // (else compaction moved the rows meanwhile: the next read checks them again)
      for (RowId id : damaged) set_aside_damaged(*st, id, nullptr);
    RowId* cursor = cursor_for(*st, filter);
    const bool stable = st->free_epoch == epoch;
    if (match) {
      RowEntry* e = st->index.find(match);
      if (e && st->takeable(*e)) {
        if (stable && match > *cursor) *cursor = match;
        return take_locked(*st, c, sub_index, *e);
      }
      from = match + 1;  // someone else took it meanwhile
    } else {
      from = batch.back().row.id + 1;
    }
    if (stable && from > *cursor) *cursor = from;
  }
}

void QueueTableImpl::unregister(Consumer::Impl& c) {
  auto st = state_.lock();
  st->waiters.remove_if([&](const Waiter& w) { return w.consumer == &c; });
  waiters_.store(st->waiters.size());
}

bool QueueTableImpl::abort_row(const Consumer* c, RowId id, std::chrono::milliseconds delay,
                               fmt::ReturnedRow* returned) {
  auto st = state_.lock();
  RowEntry* e = st->index.find(id);
  // Gone (TRUNCATE, DROP), or its lease ran out and it went back already.
  if (!e || e->owner != c || e->state != RowState::kOwned) return false;
  c->impl().lease_token.store(0);
  *returned = fmt::ReturnedRow{id, e->deliveries, 0};
  if (delay.count() > 0 && !st->dies(*e))  // a dead row waits for no retry
    returned->due_ms = delay_row(*st, *e, delay, DelayKind::kRetry);
  else
    row_became_free(*st, *e);  // may hand it out at once: *returned was taken before
  return true;
}

void QueueTableImpl::restore_delays(const std::unordered_map<RowId, uint64_t>& due_ms) {
  if (due_ms.empty()) return;
  const uint64_t now = now_ms();
  auto st = state_.lock();
  for (const auto& [id, due] : due_ms) {
    if (due <= now) continue;
    RowEntry* e = st->index.find(id);
    if (e && e->state == RowState::kFree) delay_row(*st, *e, std::chrono::milliseconds(due - now), DelayKind::kRetry);
  }
}

bool QueueTableImpl::claim_for_delete(Consumer* viewer, RowId id) {
  const QueueTableImpl* owned_table = viewer ? viewer->impl().owned_table.load() : nullptr;
  if (owned_table && owned_table != this) return false;  // everything here is invisible to it
  {
    auto st = state_.lock();
    RowEntry* e = st->index.find(id);
    if (!e) return false;
    if (e->owner == viewer && e->state == RowState::kClaimedForDelete) return true;
    bool owned_by_viewer = viewer && e->state == RowState::kOwned && e->owner == viewer;
    if (owned_table && !owned_by_viewer) return false;  // in owner mode only the owned row is visible
    if (!queued(e->state) && !owned_by_viewer) return false;
    claim_row(*st, *e, viewer);
  }
  if (viewer) {
    auto tables = viewer->impl().claim_tables.lock();
    bool known = false;
    for (auto& w : *tables) known = known || w.lock().get() == this;
    if (!known) tables->push_back(weak_from_this());
  }
  return true;
}

void QueueTableImpl::release_claims(const Consumer* c) {
  auto st = state_.lock();
  auto it = st->claims.find(c);
  if (it == st->claims.end()) return;
  std::vector<RowId> ids = std::move(it->second);
  st->claims.erase(it);
  for (RowId id : ids) {
    RowEntry* e = st->index.find(id);
    if (e && e->state == RowState::kClaimedForDelete && e->owner == c) unclaim(*st, *e);
  }
}

}  // namespace q4m
