// The row lifecycle (core/row/lifecycle.h): the one function that changes a row's state,
// where rows go when they are added or come back (the policies' placing), and hand-offs
// of takeable rows to waiting consumers. Everything here runs under the state lock.
#include <algorithm>

#include "core/table/snapshots.h"
#include "core/table/table.h"

namespace q4m {

namespace {

// The delivery count a row has once handed out again (saturating at the field's limit).
uint32_t next_delivery(const RowEntry& e) { return e.deliveries == UINT16_MAX ? e.deliveries : e.deliveries + 1u; }

// The state's count (kept for kDelayed and kDead), or null.
uint64_t* count_of(uint64_t& delayed, uint64_t& dead, RowState s) {
  return s == RowState::kDelayed ? &delayed : s == RowState::kDead ? &dead : nullptr;
}

}  // namespace

void Table::move(State& st, RowEntry& e, const Move& m, RowContext& ctx) {
  const RowState from = e.state;
  const Holder* previous = e.holder;
  // One net change per mirror, so a lock-free reader never sees a transient count.
  if (held(from) != held(m.to)) held(m.to) ? held_.fetch_add(1) : held_.fetch_sub(1);
  if (uint64_t* n = count_of(st.delayed, st.dead, from)) --*n;
  if (uint64_t* n = count_of(st.delayed, st.dead, m.to)) ++*n;
  e.holder = held(m.to) ? m.holder : nullptr;
  // An owner's end (kOwned to kClaimed) holds the delivery in progress; a DELETE of a queued
  // row, or a restored prepared part's removal, holds none.
  e.delivering = m.to == RowState::kOwned || (m.to == RowState::kClaimed && (from == RowState::kOwned || (from == RowState::kClaimed && e.delivering)));
  e.state = m.to;
  if (m.to == RowState::kClaimed) st.claims[m.holder].push_back(e.id);
  if (st.history_ms) note_end_kind(st, e.id, from, m);
  if (m.to == RowState::kFree) {
    st.free_epoch++;  // filtered scans in progress must not move their cursor past it
    // Scans skipped this row while it was taken: move their cursors back. (The plain scan
    // skips gated rows: it finds them among the policies' released rows.)
    if (!gated(st, e) && st.first_free_hint > e.id) st.first_free_hint = e.id;
    st.cursors.row_returned(e.id);
    if (e.id >= st.plain_below) subscriptions_.row_added();  // e.g. its VISIBLE_AT time came
  }
  st.policies.each([&](auto& p) { p.moved(e, from, previous, m, ctx); });
}

void Table::remove(State& st, RowEntry& e, RowContext& ctx) {
  const RowEntry before = e;
  if (Snapshots::any())  // an open snapshot may still read it (snapshot_journal.h)
    st.journal.removed(st.ticket ? st.ticket : Snapshots::ticket(), SnapshotRow{st.locate(before), st.file});
  if (held(before.state)) held_.fetch_sub(1);
  if (uint64_t* n = count_of(st.delayed, st.dead, before.state)) --*n;
  st.index.remove(before.id);
  if (st.history_ms) st.ended.unmark(before.id);
  if (st.took_over_by_id) st.removed_since_take_over.push_back(before.id);  // for a give-back (takeover.cc)
  st.policies.each([&](auto& p) { p.removed(before, ctx); });
}

void Table::requeue(State& st, RowEntry& e, std::chrono::milliseconds delay, RowContext& ctx) {
  Placement p{RowState::kFree};
  p.delay = delay;
  st.policies.each([&](auto& policy) { policy.placing(e, p, ctx); });
  move(st, e, p, ctx);
  if (p.to == RowState::kFree) offer(st, e, std::string_view(), ctx);
  release(st, ctx);  // the next row of its message group may go
}

bool Table::place_new(State& st, RowEntry& e, std::string_view payload, const RowHistory* history, RowContext& ctx) {
  if (e.id >= st.plain_below) subscriptions_.row_added();
  st.policies.each([&](auto& p) { p.added(e, payload, ctx); });
  if (history) e.deliveries = static_cast<uint16_t>(std::min<uint32_t>(history->deliveries, UINT16_MAX));
  if (history && history->held) {
    // Owned where it was copied from: held back, by no holder (taken by no one, expired by
    // no TTL, its message group held up), until take_over() gives it the state it has there.
    e.deliveries = static_cast<uint16_t>(next_delivery(e));  // the delivery in progress
    Move m{RowState::kOwned};
    m.fresh = true;
    move(st, e, m, ctx);
    return true;
  }
  Placement p{RowState::kFree};
  st.policies.each([&](auto& policy) { policy.placing_new(e, payload, history, p, ctx); });
  if (p.to == RowState::kFree) {
    offer(st, e, payload, ctx);
    return false;
  }
  p.fresh = true;
  move(st, e, p, ctx);
  return true;
}

void Table::release(State& st, RowContext& ctx) {
  for (;;) {
    std::vector<RowId> ready;
    for (bool more = st.policies.any([](const auto& p) { return p.releasing(); }); more;) {
      more = false;
      st.policies.each([&](auto& p) {
        ready.clear();
        p.released(&ready);
        for (RowId id : ready) {
          more = true;
          RowEntry* e = st.index.find(id);
          if (!e || !takeable(st, *e)) continue;  // taken already
          // Scans passed it while its policy held it back.
          st.free_epoch++;
          st.cursors.row_returned(id);
          offer(st, *e, std::string_view(), ctx);
        }
      });
    }
    bool reopened = false;
    st.policies.each([&](auto& p) { reopened = p.reopened() || reopened; });
    if (!reopened) return;
    serve_waiters(st, ctx);
  }
}

void Table::serve_waiters(State& st, RowContext& ctx) {
  if (st.successor) return;  // a moved table hands out nothing
  st.free_epoch++;  // filtered scans in progress: rows they passed while it was closed may go
  for (auto it = st.waiters.begin(); it != st.waiters.end() && open(st);) {
    const TakeRequest r = it->request;
    if (r.filter) {  // its condition reads payloads: its own take scans again, outside the lock
      it = st.waiters.erase(it);
      r.receiver->rescan();
      continue;
    }
    RowEntry* e = next_plain(st);
    if (!e) break;  // no row at all: none for a condition either
    it = st.waiters.erase(it);
    const uint32_t deliveries = next_delivery(*e);
    if (!r.receiver->accept(r.sub, e->id, deliveries, e->deliveries)) continue;  // done waiting
    give(st, r, *e, deliveries, ctx, r.provisional);
    counters_.handoffs.add();
    global_stats().wait_handoff.add();
  }
  waiters_.store(st.waiters.size());
}

void Table::offer(State& st, RowEntry& e, std::string_view payload, RowContext& ctx) {
  // A moved table hands out nothing; a closed one (MAX_IN_FLIGHT, MAX_RATE) serves its
  // waiters when it opens.
  if (st.waiters.empty() || !takeable(st, e) || st.successor || !open(st)) return;
  std::string scratch;
  bool have_payload = payload.data() != nullptr || e.length == 0;
  for (auto it = st.waiters.begin(); it != st.waiters.end();) {
    const TakeRequest& r = it->request;
    if (r.filter) {
      if (!have_payload) {  // (a caller's payload is one it wrote: no check)
        const Status s = st.read_here(st.locate(e), &scratch);
        if (s.code() == ErrorCode::kDamaged) set_aside(st, e.id, nullptr, ctx);
        if (!s.ok()) return;
        payload = scratch;
        have_payload = true;
      }
      if (!r.filter->matches(payload)) {
        ++it;
        continue;
      }
    }
    const uint32_t deliveries = next_delivery(e);
    if (!r.receiver->accept(r.sub, e.id, deliveries, e.deliveries)) {  // done waiting (timed out / got a row elsewhere)
      it = st.waiters.erase(it);
      continue;
    }
    const TakeRequest taker = r;
    st.waiters.erase(it);
    give(st, taker, e, deliveries, ctx, taker.provisional);
    waiters_.store(st.waiters.size());
    counters_.handoffs.add();
    global_stats().wait_handoff.add();
    return;
  }
  waiters_.store(st.waiters.size());
}

void Table::give(State& st, const TakeRequest& r, RowEntry& e, uint32_t deliveries, RowContext& ctx,
                 bool provisional) {
  e.deliveries = static_cast<uint16_t>(deliveries);  // before the state: policies look at both
  if (!provisional) handed_out(e, ctx);
  Move m{RowState::kOwned, r.holder};
  m.lease_ms = provisional ? 0 : r.lease_ms;  // a provisional row is leased once kept (keep_handed)
  m.more = r.more;
  move(st, e, m, ctx);
}

void Table::handed_out(const RowEntry& e, RowContext& ctx) {
  // Its first hand-out: how long it waited in the queue since its INSERT.
  if (e.deliveries == 1) counters_.handout_wait.observe(ctx.wall_ms() > e.time_ms ? ctx.wall_ms() - e.time_ms : 0);
}

bool Table::kept_across_restart(const State& st, const RowEntry& e, fmt::ReturnedRow* out) const {
  out->id = e.id;
  // A delivery still in progress (owned, or being ended by a prepared part) is not counted:
  // after a crash the row comes back without it having ended.
  out->deliveries = e.deliveries - (held(e.state) && e.delivering && e.deliveries > 0 ? 1 : 0);
  out->due_ms = 0;
  st.policies.each([&](const auto& p) { p.keeping(e, *out); });
  return out->deliveries > 0 || out->due_ms > 0;
}

}  // namespace q4m
