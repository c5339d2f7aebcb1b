#include "core/policy/leases.h"

#include <string>

namespace q4m {

std::string seconds_text(int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000) {
    std::string frac = std::to_string(1000 + ms % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + " s";
}

void Leases::moved(RowEntry& e, RowState from, const Holder* previous, const Move& m, RowContext& ctx) {
  if (from == RowState::kOwned && previous) left(previous);
  if (m.to != RowState::kOwned || !m.holder) return;  // (a copy's held row has no holder yet)
  sweep(ctx.held_rows);
  Delivery& d = deliveries_[m.holder];
  if (!m.more) {
    // Rows it still holds here: a provisional hand-off it is about to give back, having
    // taken this row of an earlier listed condition instead (Consumer::wait).
    const uint32_t held = d.rows;
    d = Delivery();
    d.since = ctx.now();
    d.rows = held;
  }
  d.rows++;
  if (m.lease_ms <= 0) return;
  if (!m.more) {
    lease(d, e.id, m.lease_ms, ctx);
  } else if (d.token != 0) {  // one more row under the batch's live lease: its deadline too
    deadlines_.push(Deadline{d.at, e.id, d.token});
  }
}

void Leases::take_over(const Leases& from, RowContext& ctx) {
  for (const auto& [holder, theirs] : from.deliveries_) {
    auto it = deliveries_.find(holder);
    if (it == deliveries_.end() && !theirs.expired) continue;  // none of its rows is here
    const uint32_t rows = it == deliveries_.end() ? 0 : it->second.rows;  // as moved() counted them here
    Delivery& d = deliveries_[holder];
    d = theirs;
    d.rows = rows;
  }
  // A holder `from` no longer knows, with no row here, is over (a give-back: told and swept there).
  for (auto it = deliveries_.begin(); it != deliveries_.end();) {
    if (it->second.rows == 0 && !from.deliveries_.count(it->first))
      it = deliveries_.erase(it);
    else
      ++it;
  }
  // The deadlines of those leases, for the rows that are theirs here (leased_row() checks).
  from.deadlines_.for_each([&](const Deadline& dl) {
    if (!leased_row(ctx.index, dl)) return;
    deadlines_.push(dl);
    ctx.wake_at(dl.at);
  });
}

// A delivery whose rows are all gone stays in the map, idle, for the holder's next one: a map
// node per delivery would cost an allocation per message. Idle ones are swept once they
// outnumber the held rows by far.
void Leases::left(const Holder* holder) {
  auto it = deliveries_.find(holder);
  if (it != deliveries_.end() && it->second.rows > 0) it->second.rows--;
}

void Leases::sweep(uint64_t held_rows) {
  if (deliveries_.size() < 2 * held_rows + 1024) return;
  for (auto it = deliveries_.begin(); it != deliveries_.end();) {
    if (it->second.rows == 0 && !it->second.expired)
      it = deliveries_.erase(it);
    else
      ++it;
  }
}

void Leases::lease(Delivery& d, RowId id, int64_t ms, RowContext& ctx) {
  d.token = next_token();
  d.lease_ms = ms;
  d.at = ctx.now() + std::chrono::milliseconds(ms);
  // Leases ended in time leave their deadlines behind: drop them once they outnumber the
  // rows that can hold a lease (at most the held ones) by far.
  if (deadlines_.size() >= 2 * ctx.held_rows + 1024)
    deadlines_.drop_stale([&](const Deadline& dl) { return leased_row(ctx.index, dl) != nullptr; });
  deadlines_.push(Deadline{d.at, id, d.token});
  ctx.wake_at(d.at);
}

RowEntry* Leases::leased_row(RowIndex& index, const Deadline& dl) const {
  RowEntry* e = index.find(dl.id);
  if (!e || e->state != RowState::kOwned || !e->holder) return nullptr;
  auto it = deliveries_.find(e->holder);
  if (it == deliveries_.end()) return nullptr;
  // A deadline of the lease that just expired is live too: the other rows of its batch.
  return it->second.token == dl.token || it->second.expired_token == dl.token ? e : nullptr;
}

SteadyClock::time_point Leases::due(RowContext& ctx) {
  while (deadlines_.due(ctx.now())) {
    const Deadline dl = deadlines_.pop();
    RowEntry* e = leased_row(ctx.index, dl);
    if (!e) continue;
    Delivery& d = deliveries_[e->holder];
    if (d.token == dl.token) d.expired_token = dl.token;  // the rest of its batch follows
    d.expired = true;
    d.token = 0;
    ctx.counters->lease_expiries.add();
    global_stats().lease_expiries.add();
    ctx.return_row(e->id);
  }
  return deadlines_.earliest();
}

Status Leases::expired_status(const Delivery& d, RowId first, size_t count) const {
  const std::string lease = " (" + seconds_text(d.lease_ms) + ") ran out before ";
  if (count > 1)
    return Status(ErrorCode::kLeaseExpired,
                  "the lease of the batch of " + std::to_string(count) + " rows from row " + std::to_string(first) +
                      lease + "it was ended: its rows went back to the queue and were not removed");
  return Status(ErrorCode::kLeaseExpired, "the lease of row " + std::to_string(first) + lease +
                                              "it was ended: the row went back to the queue and was not removed");
}

Status Leases::settle(const Holder* holder, RowId first, size_t count) {
  auto it = deliveries_.find(holder);
  if (it == deliveries_.end()) return Status::Ok();  // no lease (or its rows vanished: TRUNCATE)
  Delivery& d = it->second;
  if (d.expired) {
    Status s = expired_status(d, first, count);
    d.expired = false;  // told
    return s;
  }
  d.token = 0;  // its deadlines are stale from here on
  return Status::Ok();
}

Status Leases::renew(const Holder* holder, const RowId* ids, size_t count, std::chrono::milliseconds lease_for,
                     RowIndex& index, RowContext& ctx) {
  auto it = deliveries_.find(holder);
  if (it != deliveries_.end() && it->second.expired) return settle(holder, ids[0], count);
  bool leased = false;  // the first row still held gets a new token (old deadlines go stale)
  for (size_t i = 0; i < count; i++) {
    const RowEntry* e = index.find(ids[i]);
    if (!e || e->holder != holder || e->state != RowState::kOwned) continue;  // gone (TRUNCATE, DELETE)
    Delivery& d = deliveries_[holder];
    if (leased) {
      deadlines_.push(Deadline{d.at, ids[i], d.token});
    } else {
      lease(d, ids[i], lease_for.count(), ctx);
      leased = true;
    }
  }
  return Status::Ok();
}

void Leases::let_go(const Holder* holder) {
  auto it = deliveries_.find(holder);
  if (it == deliveries_.end()) return;
  it->second.expired = false;
  it->second.token = 0;
}

bool Leases::expired(const Holder* holder) const {
  auto it = deliveries_.find(holder);
  return it != deliveries_.end() && it->second.expired;
}

SteadyClock::time_point Leases::since(const Holder* holder) const {
  auto it = deliveries_.find(holder);
  return it == deliveries_.end() || it->second.rows == 0 ? SteadyClock::time_point() : it->second.since;
}

bool Leases::lease_end(const Holder* holder, SteadyClock::time_point* at) const {
  auto it = deliveries_.find(holder);
  if (it == deliveries_.end() || it->second.token == 0) return false;
  *at = it->second.at;
  return true;
}

}  // namespace q4m
