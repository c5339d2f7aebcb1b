// SQL scans: what a connection sees (the visibility rules in queue_table.h), reads of rows
// the caches do not hold, each checked against its row's checksum (core/file/row_check.h),
// the list of owned rows (QUEUE_OWNED_ROWS) and of groups holding rows back
// (QUEUE_HELD_GROUPS).
#include <algorithm>

#include "core/table/consumer.h"
#include "core/table/table.h"

namespace q4m {

namespace {

// The owned row a scan after `after` reads next; 0 if none is left.
RowId next_owned(const View& v, RowId after) {
  if (!v.batch) return v.owned > after ? v.owned : 0;
  auto it = std::upper_bound(v.batch->begin(), v.batch->end(), after);
  return it == v.batch->end() ? 0 : *it;
}

bool visible_in_scan(const RowEntry& e, const View& v) {
  return queued(e.state) || (v.sees_held && held(e.state)) ||
         (e.state == RowState::kClaimed && v.holder && e.holder == v.holder);
}

}  // namespace

Status Table::next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload, bool* found) {
  *found = false;
  // Only the viewer's own thread scans with it, so reading its batch is safe.
  const View v = viewer ? viewer->view() : View();
  if (v.sees_nothing_in(this)) return Status::Ok();
  const bool owner = v.owned_in != nullptr;  // here, or on the other side of a take-over
  RowId owned = owner ? next_owned(v, after) : 0;
  if (owner && !owned) return Status::Ok();  // the owner's scan is past its rows
  // Rows a subscription's consumer owns are the subscription's to check (subscriptions.h).
  const bool subscriber = owner && v.owned_in != this && subscriptions_.is_subscription(v.owned_in);
  UncachedRead r;
  {
    auto st = state_.lock();
    RowEntry* e = nullptr;
    if (owner) {
      // Skips rows of a batch that are gone (a DELETE, TRUNCATE or an expired lease).
      for (; owned; owned = next_owned(v, owned)) {
        e = st->index.find(owned);
        if (e && (e->holder == v.holder || subscriber)) break;
      }
      if (!owned) return Status::Ok();
    } else {
      size_t pos = st->index.lower_bound(after + 1), end = st->index.end_pos();
      while (pos < end && !visible_in_scan(st->index.at(pos), v)) pos++;
      if (st->index.read_failed()) return st->index.take_read_error();
      if (pos == end) return Status::Ok();
      e = &st->index.at(pos);
    }
    *id = e->id;
    *found = true;
    if (!payload) return Status::Ok();
    if (std::optional<Status> s = read_locked(*st, *e, v.holder, payload, &r)) return *s;
  }
  return read_uncached(r, payload, v.holder);
}

std::optional<Status> Table::read_locked(State& st, RowEntry& e, const Holder* reader, std::string* payload,
                                         UncachedRead* r) {
  const RowLocation row = st.locate(e);
  Status s;
  if (!st.read_cached(row, payload, &s)) {
    *r = st.uncached_read(row);
    return std::nullopt;
  }
  if (s.code() == ErrorCode::kDamaged) {
    RowContext ctx = context(st);
    set_aside(st, e.id, reader, ctx);
    finish(st, ctx);
  }
  return s;
}

Status Table::read_uncached(const UncachedRead& r, std::string* payload, const Holder* reader) {
  Status s;
  if (!r.block) {
    s = r.file->read(r.row.offset, r.row.disk_length(), payload);
    if (s.ok()) s = check_row(r.row, r.file->path(), payload->data());
  } else {
    std::string block;
    s = r.file->read(r.block->begin, static_cast<size_t>(r.block->end - r.block->begin), &block);
    if (!s.ok()) return s;
    const char* bytes = block.data() + (r.row.offset - r.block->begin);
    s = check_row(r.row, r.file->path(), bytes);
    payload->assign(bytes, r.row.length);
    auto st = state_.lock();  // the block is kept whatever this row's check said: each read checks its row
    if (st->file == r.file) st->window.fill(r.file->id(), r.block->begin, std::move(block));
  }
  payload->resize(r.row.length);
  if (s.code() == ErrorCode::kDamaged) {
    auto st = state_.lock();
    if (st->file == r.file) {  // (else compaction moved the row meanwhile: the next read checks it again)
      RowContext ctx = context(*st);
      set_aside(*st, r.row.id, reader, ctx);
      finish(*st, ctx);
    }
  }
  return s;
}

Status Table::read_row(RowId id, std::string* payload, bool* found, const Consumer* reader) {
  return read(id, payload, found, reader ? &reader->holder() : nullptr);
}

Status Table::read(RowId id, std::string* payload, bool* found, const Holder* reader) {
  *found = false;
  UncachedRead r;
  {
    auto st = state_.lock();
    RowEntry* e = st->index.find(id);
    if (st->index.read_failed()) return st->index.take_read_error();
    if (!e) return Status::Ok();
    *found = true;
    if (std::optional<Status> s = read_locked(*st, *e, reader, payload, &r)) return *s;
  }
  return read_uncached(r, payload, reader);
}

Status Table::next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) {
  *found = false;
  UncachedRead r;
  {
    auto st = state_.lock();
    size_t pos = st->index.lower_bound(after + 1), end = st->index.end_pos();
    while (pos < end && st->index.at(pos).state == RowState::kRemoved) pos++;
    if (st->index.read_failed()) return st->index.take_read_error();
    if (pos == end) return Status::Ok();
    RowEntry& e = st->index.at(pos);
    *id = e.id;
    *found = true;
    if (history) {
      fmt::ReturnedRow kept;
      kept_across_restart(*st, e, &kept);
      *history = RowHistory{e.time_ms, kept.deliveries, kept.due_ms, e.id, e.state == RowState::kOwned};
    }
    if (!payload) return Status::Ok();
    if (std::optional<Status> s = read_locked(*st, e, nullptr, payload, &r)) return *s;
  }
  return read_uncached(r, payload, nullptr);
}

uint64_t Table::visible_count(const Consumer* viewer) {
  const View v = viewer ? viewer->view() : View();
  if (v.sees_nothing_in(this)) return 0;
  if (v.owned_in && !v.batch) return 1;
  if (v.batch) {  // the rows of its batch still held
    const bool subscriber = v.owned_in != this && subscriptions_.is_subscription(v.owned_in);
    auto st = state_.lock();
    uint64_t n = 0;
    for (RowId id : *v.batch) {
      const RowEntry* e = st->index.find(id);
      n += e && (e->holder == v.holder || subscriber);
    }
    return n;
  }
  uint64_t rows = rows_.load(std::memory_order_relaxed), held = held_.load(std::memory_order_relaxed);
  if (v.sees_held) return rows;
  return rows > held ? rows - held : 0;
}

namespace {

// Milliseconds from `from` to `to`; 0 if `to` is not later.
uint64_t ms_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

}  // namespace

std::vector<OwnedRowInfo> Table::owned_rows() {
  // Slices keep the state lock short however long the index: consumers go on meanwhile.
  constexpr size_t kSlice = 4096;
  std::vector<OwnedRowInfo> out;
  RowId after = 0;
  uint64_t held_seen = 0;
  for (bool more = true; more;) {
    auto st = state_.lock();
    const uint64_t wall = now_ms();
    const SteadyClock::time_point now = SteadyClock::now();
    if (st->successor) return out;  // its owners are listed where their rows moved (takeover.cc)
    const Leases& leases = st->policies.get<Leases>();
    size_t pos = st->index.lower_bound(after + 1);
    const size_t end = std::min(st->index.end_pos(), pos + kSlice);
    for (; pos < end; pos++) {
      const RowEntry& e = st->index.at(pos);
      after = e.id;
      if (!held(e.state)) continue;
      held_seen++;
      if (e.state != RowState::kOwned || !e.holder) continue;
      OwnedRowInfo r;
      r.id = e.id;
      r.connection_id = e.holder->connection_id();
      r.deliveries = e.deliveries;
      r.row_age_ms = wall > e.time_ms ? wall - e.time_ms : 0;
      const SteadyClock::time_point since = leases.since(e.holder);
      r.owned_ms = since != SteadyClock::time_point() ? ms_between(since, now) : 0;
      SteadyClock::time_point lease_end;
      if (leases.lease_end(e.holder, &lease_end)) r.lease_left_ms = static_cast<int64_t>(ms_between(now, lease_end));
      out.push_back(r);
    }
    more = pos < st->index.end_pos() && held_seen < held_.load();
  }
  return out;
}

std::vector<HeldGroupInfo> Table::held_groups(size_t max) {
  auto st = state_.lock();
  if (st->dropped || st->successor) return {};
  return st->policies.get<MessageGroups>().held_groups(max);
}

}  // namespace q4m
