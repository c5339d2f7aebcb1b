// SubscriptionGates: see subscription_gates.h.
#include "core/table/subscription_gates.h"

#include <algorithm>
#include <iterator>

#include "core/policy/message_groups.h"
#include "core/table/table.h"

namespace q4m {

void SubscriptionGates::configure(const TableOptions& o, Time now) {
  grouped_ = o.message_group != nullptr;
  concurrency_ = o.group_concurrency;
  if (o.group_rate != group_rate_ || o.group_burst != group_burst_) {
    group_rate_ = o.group_rate;
    group_burst_ = o.group_burst;
    for (auto& [key, g] : groups_) g.bucket.set(group_rate_, group_burst_, now);  // tokens kept up to the new burst
  }
  max_in_flight_ = o.max_in_flight;
  if (o.max_rate != max_rate_ || o.max_burst != max_burst_) {
    max_rate_ = o.max_rate;
    max_burst_ = o.max_burst;
    bucket_.set(max_rate_, max_burst_, now);
  }
}

bool SubscriptionGates::open(Time now) {
  if (max_in_flight_ != 0 && in_flight_ >= max_in_flight_) return false;  // a release wakes the waiters
  if (bucket_.limited() && !bucket_.has(now)) {
    wait_for_token(bucket_.next(now));
    return false;
  }
  return true;
}

bool SubscriptionGates::allows(Scan& scan, RowId id, const std::string* key, Time now) {
  if (!key || !grouped_) return true;
  auto p = scan.passed.find(*key);
  const size_t passed = p == scan.passed.end() ? 0 : p->second;
  auto g = groups_.find(*key);
  if (concurrency_ != 0) {
    // In line before it: the free rows the scan passed and its group's rows held below it;
    // and no more rows held than the group's slots.
    size_t before = passed, held = 0;
    if (g != groups_.end()) {
      held = g->second.held.size();
      before += static_cast<size_t>(std::distance(g->second.held.begin(), g->second.held.lower_bound(id)));
    }
    if (before >= concurrency_ || held >= concurrency_) return false;
  }
  if (group_rate_ > 0 && g != groups_.end() && !g->second.bucket.has(now)) {
    wait_for_token(g->second.bucket.next(now));
    return false;
  }
  return true;
}

void SubscriptionGates::passed(Scan& scan, const std::string* key) {
  if (key && grouped_) scan.passed[*key]++;
}

SubscriptionGates::Group& SubscriptionGates::group(const std::string& key, Time now) {
  auto [it, fresh] = groups_.try_emplace(key);
  if (fresh && group_rate_ > 0) it->second.bucket.set(group_rate_, group_burst_, now);  // a new bucket is full
  return it->second;
}

void SubscriptionGates::handed_out(RowId id, const std::string* key, Time now) {
  if (bucket_.limited()) bucket_.spend(now);
  Out& o = out_[id];
  o.flying = true;
  in_flight_++;
  if (key && grouped_) {
    o.grouped = true;
    o.key = *key;
    Group& g = group(*key, now);
    g.held.insert(id);
    if (group_rate_ > 0) g.bucket.spend(now);
  }
}

void SubscriptionGates::delayed(RowId id) {
  auto it = out_.find(id);
  if (it == out_.end() || !it->second.flying) return;
  it->second.flying = false;
  in_flight_--;
}

bool SubscriptionGates::released(RowId id) {
  auto it = out_.find(id);
  if (it == out_.end()) return false;
  if (it->second.flying) in_flight_--;
  if (it->second.grouped) {
    auto g = groups_.find(it->second.key);
    if (g != groups_.end()) {
      g->second.held.erase(id);
      if (g->second.held.empty() && g->second.bucket.full(SteadyClock::now())) groups_.erase(g);
    }
  }
  out_.erase(it);
  return active();
}

bool SubscriptionGates::token_came(Time now) {
  if (token_at_ > now) return false;
  token_at_ = Time::max();
  return true;
}

void SubscriptionGates::wait_for_token(Time at) { token_at_ = std::min(token_at_, at); }

void SubscriptionGates::sweep(Time now) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->second.held.empty() && it->second.bucket.full(now))
      it = groups_.erase(it);
    else
      ++it;
  }
}

void SubscriptionGates::clear() {
  groups_.clear();
  out_.clear();
  in_flight_ = 0;
  token_at_ = Time::max();
}

// ---- the table's side ---------------------------------------------------------------------

bool Table::next_for_subscription(RowId after, SubscriptionRow* out) {
  auto st = state_.lock();
  size_t pos = st->index.lower_bound(after + 1), end = st->index.end_pos();
  while (pos < end && st->index.at(pos).state == RowState::kRemoved) pos++;
  if (pos == end) return false;
  const RowEntry& e = st->index.at(pos);
  out->id = e.id;
  out->visible = e.state != RowState::kDelayed;  // VISIBLE_AT_COLUMN: not before its time
  const std::string* key = st->policies.get<MessageGroups>().key_of(e);
  out->grouped = key != nullptr;
  if (key) out->key = *key;
  return true;
}

}  // namespace q4m
