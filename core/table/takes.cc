// queue_wait's side of a table: takes of takeable rows and the waiters that get the next
// one handed to them.
#include "core/table/table.h"

namespace q4m {

namespace {

uint32_t next_delivery(const RowEntry& e) { return e.deliveries == UINT16_MAX ? e.deliveries : e.deliveries + 1u; }

}  // namespace

RowId* Table::cursor_for(State& st, const std::shared_ptr<const RowFilter>& filter) {
  return filter ? st.cursors.cursor_for(filter) : &st.first_free_hint;
}

QueueTable::Take Table::take_locked(State& st, const TakeRequest& r, RowEntry& e, RowContext& ctx) {
  // A batch stops growing once its lease ran out (its rows are going back already).
  if (r.more && st.policies.get<Leases>().expired(r.holder)) return Take::kConsumerDone;
  const uint32_t deliveries = next_delivery(e);
  if (!r.receiver->accept(r.sub, e.id, deliveries, e.deliveries)) return Take::kConsumerDone;  // got a row elsewhere meanwhile
  give(st, r, e, deliveries, ctx, false);  // a take is never provisional: it scanned in order
  global_stats().wait_immediate.add();
  return Take::kTaken;
}

// A copying ALTER TABLE moved the rows (takeover.cc): nothing is handed out here any more. A
// blocking wait registers all the same, to be told if the table is dropped (or handed a row,
// should the ALTER fail and the rows come back).
QueueTable::Take Table::moved_take(State& st, const TakeRequest& r, bool register_waiter) {
  return register_waiter ? register_locked(st, r) : Take::kNone;
}

QueueTable::Take Table::register_locked(State& st, const TakeRequest& r) {
  if (!r.receiver->waiting()) return Take::kConsumerDone;
  st.waiters.push_back(Waiter{r});
  waiters_.store(st.waiters.size());
  return Take::kRegistered;
}

// The cursor of (table, filter) says: rows before it are not takeable-and-matching. It only
// moves forward when no row became takeable during the scan (free_epoch unchanged), and a
// row becoming takeable moves it back, so a returned row is never skipped.
RowEntry* Table::next_plain(State& st) {
  if (!open(st)) return nullptr;  // MAX_IN_FLIGHT, MAX_RATE: serve_waiters() when it opens
  RowId* cursor = &st.first_free_hint;
  size_t pos = st.index.lower_bound(*cursor), end = st.index.end_pos();
  // Gated rows are not this scan's: the oldest one that may go is a policy's first released row.
  while (pos < end && (st.index.at(pos).state != RowState::kFree || gated(st, st.index.at(pos)))) pos++;
  if (st.index.read_failed()) return nullptr;  // the cursor stays before the rows it could not read
  if (pos < end && st.index.at(pos).id >= st.plain_below) pos = end;  // the subscriptions' rows
  // (Not next_rowid_: rows with smaller ids may be durable but not yet published.)
  if (pos < end)
    *cursor = st.index.at(pos).id;
  else if (end > 0)
    *cursor = st.index.at(end - 1).id + 1;
  RowId ready = 0;
  st.policies.each([&](const auto& p) {
    const RowId id = p.first_released();
    if (id != 0 && (ready == 0 || id < ready)) ready = id;
  });
  RowEntry* e = nullptr;
  if (ready != 0 && (pos == end || ready < st.index.at(pos).id)) {
    e = st.index.find(ready);
    if (e && !takeable(st, *e)) e = nullptr;  // released by one policy, refused by another (policy.h)
  }
  if (!e && pos < end) e = &st.index.at(pos);
  return e;
}

QueueTable::Take Table::failed_take(State& st) {
  st.take_failure = st.index.take_read_error();
  return Take::kFailed;
}

Status Table::take_failure() {
  Status s = state_.lock()->take_failure;
  return s.ok() ? Status(ErrorCode::kIo, "file " + path() + ": a take failed") : s;
}

QueueTable::Take Table::take(const TakeRequest& r, bool register_waiter) {
  if (!r.filter) {  // no payload reads: one lock hold
    auto st = state_.lock();
    if (st->dropped) return Take::kDropped;
    if (st->successor) return moved_take(*st, r, register_waiter);
    RowContext ctx = context(*st);
    Take result = Take::kNone;
    if (RowEntry* e = next_plain(*st))
      result = take_locked(*st, r, *e, ctx);
    else if (st->index.read_failed())
      result = failed_take(*st);
    else if (register_waiter)
      result = register_locked(*st, r);
    finish(*st, ctx);
    return result;
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
      if (st->successor) return moved_take(*st, r, register_waiter);
      // A limit of the whole table: no row now, and the cursor stays where it is (the
      // waiter scans again when the table opens: serve_waiters()).
      if (!open(*st)) return register_waiter ? register_locked(*st, r) : Take::kNone;
      RowId* cursor = cursor_for(*st, r.filter);
      if (!started || st->free_epoch != epoch) {  // (re)start: a row behind us may be takeable again
        from = *cursor;
        epoch = st->free_epoch;
        started = true;
      }
      batch.clear();
      cached.clear();
      damaged.clear();
      st->index.release_read_back(from);  // the blocks this scan passed
      size_t pos = st->index.lower_bound(from), end = st->index.end_pos();
      for (; pos < end && batch.size() < kScanBatch; pos++) {
        const RowEntry& e = st->index.at(pos);
        if (!takeable(*st, e)) continue;
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
      if (st->index.read_failed()) return failed_take(*st);  // the cursor stays where it was
      set_aside(*st, damaged);  // (they were takeable: free, so not takeable any more)
      damaged.clear();
      if (batch.empty()) {  // checked up to the end, with no row freed meanwhile
        if (end > 0 && st->index.at(end - 1).id + 1 > *cursor) *cursor = st->index.at(end - 1).id + 1;
        return register_waiter ? register_locked(*st, r) : Take::kNone;
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
      if (r.filter->matches(row)) {
        match = k.row.id;
        break;
      }
    }
    auto st = state_.lock();
    if (st->dropped) return Take::kDropped;
    if (st->successor) return moved_take(*st, r, register_waiter);
    // (Else compaction moved the rows meanwhile: the next read checks them again.)
    if (st->file == file) set_aside(*st, damaged);
    if (!open(*st)) return register_waiter ? register_locked(*st, r) : Take::kNone;  // as above
    RowId* cursor = cursor_for(*st, r.filter);
    const bool stable = st->free_epoch == epoch;
    if (match) {
      RowEntry* e = st->index.find(match);
      if (e && takeable(*st, *e)) {
        if (stable && match > *cursor) *cursor = match;
        RowContext ctx = context(*st);
        const Take result = take_locked(*st, r, *e, ctx);
        finish(*st, ctx);
        return result;
      }
      from = match + 1;  // someone else took it meanwhile
    } else {
      from = batch.back().row.id + 1;
    }
    if (stable && from > *cursor) *cursor = from;
  }
}

QueueTable::Take Table::take_dead(const TakeRequest& r) {
  auto st = state_.lock();
  if (st->dropped) return Take::kDropped;
  if (st->successor) return Take::kNone;  // a moved table hands out nothing
  const RowId id = st->policies.get<DeadLetters>().oldest();
  RowEntry* e = id ? st->index.find(id) : nullptr;
  // (the dead-letter list is exact; the check is a guard against ever handing out a held row)
  if (!e || e->state != RowState::kDead) return Take::kNone;
  RowContext ctx = context(*st);
  const Take result = take_locked(*st, r, *e, ctx);
  finish(*st, ctx);
  return result;
}

void Table::unregister(const Receiver* receiver) {
  auto st = state_.lock();
  st->waiters.remove_if([&](const Waiter& w) { return w.request.receiver == receiver; });
  waiters_.store(st->waiters.size());
}

}  // namespace q4m
