#include "core/policy/group_order.h"

#include <algorithm>
#include <limits>

namespace q4m {

void GroupOrder::set_limits(const Limits& limits, const RowLookup&, Time now) {
  const bool new_window = limits.concurrency != limits_.concurrency;
  limits_ = limits;
  for (uint32_t slot = 0; slot < groups_.size(); slot++) {
    Group& g = groups_[slot];
    if (!g.used) continue;
    if (g.members == 0) {  // idle: kept only for its bucket
      if (!limits_.rate) release_slot(slot);
      continue;
    }
    g.bucket.set(limits_.rate, limits_.burst, now);
    if (new_window)
      rebuild(slot, now);
    else
      fit(slot, now);
  }
}

void GroupOrder::add(RowId id, std::string_view key, const RowLookup& lookup, Time now) {
  if (member_.count(id)) return;
  auto [it, fresh] = by_key_.try_emplace(std::string(key), 0);
  if (fresh) {
    if (free_slots_.empty()) {
      it->second = static_cast<uint32_t>(groups_.size());
      groups_.emplace_back();
    } else {
      it->second = free_slots_.back();
      free_slots_.pop_back();
    }
    Group& g = groups_[it->second];
    g.used = true;
    g.key = it->first;
    g.bucket.set(limits_.rate, limits_.burst, now);  // a new key starts with a full bucket
  }
  const uint32_t slot = it->second;
  Group& g = groups_[slot];
  if (g.members == 0) groups_with_rows_++;
  if (g.rows.empty() || g.rows.back() < id) {
    g.rows.push_back(id);  // the usual case: a new row
  } else {
    auto at = std::lower_bound(g.rows.begin(), g.rows.end(), id);
    if (at == g.rows.end() || *at != id) g.rows.insert(at, id);
  }
  g.members++;
  Member& m = member_[id];
  m.slot = slot;
  apply(id, m, lookup(id), now);
}

void GroupOrder::remove(RowId id, const RowLookup&, Time now) {
  auto found = member_.find(id);
  if (found == member_.end()) return;
  const uint32_t slot = found->second.slot;
  apply(id, found->second, RowView(), now);  // out of the counts and the window
  member_.erase(found);
  Group& g = groups_[slot];
  while (!g.rows.empty() && !member_.count(g.rows.front())) g.rows.pop_front();
  if (--g.members == 0) {
    groups_with_rows_--;
    g.rows.clear();
    // The key's bucket outlives its rows until it is full again.
    if (g.bucket.limited() && !g.bucket.full(now))
      schedule(slot, g.bucket.refilled(now));
    else
      release_slot(slot);
    return;
  }
  if (g.rows.size() > 2 * g.members + 32) prune(g);
}

void GroupOrder::refresh(RowId id, const RowLookup& lookup, Time now) {
  auto m = member_.find(id);
  if (m == member_.end()) return;
  apply(id, m->second, lookup(id), now);
}

void GroupOrder::refresh_all(const RowLookup& lookup, Time now) {
  for (auto& [id, m] : member_) {
    const RowView v = lookup(id);
    Group& g = groups_[m.slot];
    const bool in = v.exists && v.in_line, fr = in && v.free, out = v.exists && v.out;
    if (m.out != out) out ? g.out++ : g.out--;
    if (m.free != fr) fr ? (g.free++, free_rows_++) : (g.free--, free_rows_--);
    m.out = out;
    m.free = fr;
    m.in_line = in;
  }
  for (uint32_t slot = 0; slot < groups_.size(); slot++)
    if (groups_[slot].members) rebuild(slot, now);
}

void GroupOrder::handed_out(RowId id, Time now) {
  if (!limits_.rate) return;
  auto m = member_.find(id);
  if (m != member_.end()) groups_[m->second.slot].bucket.spend(now);
}

GroupOrder::Time GroupOrder::due(const RowLookup&, Time now) {
  while (!wakes_.empty() && wakes_.front().at <= now) {
    std::pop_heap(wakes_.begin(), wakes_.end(), later);
    const Wake w = wakes_.back();
    wakes_.pop_back();
    if (w.slot >= groups_.size()) continue;
    Group& g = groups_[w.slot];
    if (g.generation != w.generation || g.wake != w.at) continue;  // the group ended, or wakes earlier
    g.wake = Time::max();
    if (g.members == 0) {  // idle: forgotten once its bucket is full
      if (g.bucket.full(now))
        release_slot(w.slot);
      else
        schedule(w.slot, g.bucket.refilled(now));
      continue;
    }
    fit(w.slot, now);
  }
  return next_due();
}

void GroupOrder::apply(RowId id, Member& m, const RowView& v, Time now) {
  const uint32_t slot = m.slot;
  Group& g = groups_[slot];
  const bool in = v.exists && v.in_line, fr = in && v.free, out = v.exists && v.out;
  if (m.out != out) {
    m.out = out;
    out ? g.out++ : g.out--;
  }
  if (m.free != fr) {
    m.free = fr;
    fr ? (g.free++, free_rows_++) : (g.free--, free_rows_--);
  }
  if (m.in_line != in) {
    m.in_line = in;
    if (limits_.concurrency != 0) {
      if (in) {
        // Back in line inside the window (a dead row revived): the window's last row leaves
        // it. After the window, extend() below takes it if the window has room.
        if (g.wlast != 0 && id < g.wlast) {
          g.wcount++;
          shrink(g);
        }
      } else if (g.wlast != 0 && id <= g.wlast) {  // leaves the window: the next row joins it
        g.wcount--;
        if (id == g.wlast) g.wlast = previous_in_line(g, id);
      }
    }
  }
  extend(g);
  set_open(g, id, m, fr && in_window(g, id));
  fit(slot, now);
}

void GroupOrder::extend(Group& g) {
  const uint32_t n = limits_.concurrency;
  if (n == 0 || g.wcount >= n) return;
  auto it = g.wlast ? std::upper_bound(g.rows.begin(), g.rows.end(), g.wlast) : g.rows.begin();
  for (; it != g.rows.end() && g.wcount < n; ++it) {
    auto m = member_.find(*it);
    if (m == member_.end() || !m->second.in_line) continue;
    g.wlast = *it;
    g.wcount++;
    if (m->second.free) set_open(g, *it, m->second, true);
  }
}

void GroupOrder::shrink(Group& g) {
  while (g.wcount > limits_.concurrency && g.wlast != 0) {
    const RowId last = g.wlast;
    g.wcount--;
    g.wlast = previous_in_line(g, last);
    auto m = member_.find(last);
    if (m != member_.end()) set_open(g, last, m->second, false);
  }
}

GroupOrder::RowId GroupOrder::previous_in_line(const Group& g, RowId id) const {
  auto it = std::lower_bound(g.rows.begin(), g.rows.end(), id);
  while (it != g.rows.begin()) {
    --it;
    auto m = member_.find(*it);
    if (m != member_.end() && m->second.in_line) return *it;
  }
  return 0;
}

void GroupOrder::set_open(Group& g, RowId id, Member& m, bool open) {
  if (m.open == open) return;
  m.open = open;
  if (open) {
    g.open.insert(id);
    if (g.rlast != 0 && id < g.rlast) {  // inside the ready prefix: ready (fit() trims the prefix)
      ready_.insert(id);
      newly_ready_.push_back(id);
      g.ready++;
    }
    return;
  }
  auto it = g.open.find(id);
  if (it == g.open.end()) return;
  if (g.rlast != 0 && id <= g.rlast) {
    ready_.erase(id);
    g.ready--;
    if (id == g.rlast) g.rlast = it == g.open.begin() ? 0 : *std::prev(it);
  }
  g.open.erase(it);
}

void GroupOrder::fit(uint32_t slot, Time now) {
  Group& g = groups_[slot];
  const uint32_t n = limits_.concurrency;
  const size_t slots = n == 0 ? std::numeric_limits<size_t>::max() : g.out >= n ? 0 : n - g.out;
  const size_t allowed = std::min(g.open.size(), slots);
  size_t want = allowed;
  if (g.bucket.limited()) want = static_cast<size_t>(std::min<uint64_t>(want, g.bucket.tokens(now)));
  while (g.ready < want) {
    auto it = g.rlast ? g.open.upper_bound(g.rlast) : g.open.begin();
    ready_.insert(*it);
    newly_ready_.push_back(*it);
    g.rlast = *it;
    g.ready++;
  }
  while (g.ready > want) {
    auto it = g.open.find(g.rlast);
    ready_.erase(g.rlast);
    g.rlast = it == g.open.begin() ? 0 : *std::prev(it);
    g.ready--;
  }
  // Rows wait for a token: the timer comes back when one more than the group spends now is
  // there (never at `now`: due() would find the same again). A bucket that cannot hold one
  // more needs no timer: a hand-out of a ready row comes back here.
  if (want < allowed) {
    const Time at = g.bucket.when(want + 1, now);
    if (at != Time::max()) schedule(slot, at);
  }
  const bool at_limit = g.free > 0 && g.ready == 0;
  if (at_limit != g.at_limit) {
    g.at_limit = at_limit;
    at_limit ? at_limit_++ : at_limit_--;
  }
}

void GroupOrder::rebuild(uint32_t slot, Time now) {
  Group& g = groups_[slot];
  for (RowId id : g.open) {
    member_[id].open = false;
    if (g.rlast != 0 && id <= g.rlast) ready_.erase(id);
  }
  g.open.clear();
  g.ready = 0;
  g.rlast = 0;
  g.wlast = 0;
  g.wcount = 0;
  if (limits_.concurrency != 0) {
    extend(g);
  } else {
    for (RowId id : g.rows) {
      auto m = member_.find(id);
      if (m != member_.end() && m->second.free) set_open(g, id, m->second, true);
    }
  }
  fit(slot, now);
}

void GroupOrder::schedule(uint32_t slot, Time at) {
  Group& g = groups_[slot];
  if (g.wake <= at) return;
  g.wake = at;
  wakes_.push_back(Wake{at, slot, g.generation});
  std::push_heap(wakes_.begin(), wakes_.end(), later);
}

void GroupOrder::release_slot(uint32_t slot) {
  Group& g = groups_[slot];
  if (g.at_limit) at_limit_--;
  by_key_.erase(g.key);
  const uint32_t generation = g.generation + 1;
  g = Group();
  g.generation = generation;
  free_slots_.push_back(slot);
}

void GroupOrder::prune(Group& g) {
  g.rows.erase(std::remove_if(g.rows.begin(), g.rows.end(), [&](RowId id) { return !member_.count(id); }),
               g.rows.end());
}

std::vector<GroupOrder::RowId> GroupOrder::take_newly_ready() {
  std::vector<RowId> out;
  out.swap(newly_ready_);
  return out;
}

std::vector<GroupOrder::HeldGroup> GroupOrder::held_groups(size_t max, Time now) const {
  std::vector<HeldGroup> all;
  const uint32_t n = limits_.concurrency;
  for (const Group& g : groups_) {
    if (g.members == 0 || g.free <= g.ready) continue;
    HeldGroup h;
    for (RowId id : g.rows)
      if (member_.count(id)) {
        h.row = id;
        break;
      }
    h.out = g.out;
    h.ready = g.ready;
    h.held = g.free - g.ready;
    const size_t slots = n == 0 ? std::numeric_limits<size_t>::max() : g.out >= n ? 0 : n - g.out;
    h.by_rate = g.ready < std::min(g.open.size(), slots);
    if (g.bucket.limited() && !g.bucket.has(now))
      h.next_token_ms = std::chrono::duration_cast<std::chrono::milliseconds>(g.bucket.next(now) - now).count();
    all.push_back(h);
  }
  auto most = [](const HeldGroup& a, const HeldGroup& b) { return a.held != b.held ? a.held > b.held : a.row < b.row; };
  if (all.size() > max) {
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(max), all.end(), most);
    all.resize(max);
  } else {
    std::sort(all.begin(), all.end(), most);
  }
  return all;
}

void GroupOrder::clear() {
  by_key_.clear();
  groups_.clear();
  free_slots_.clear();
  member_.clear();
  ready_.clear();
  newly_ready_.clear();
  wakes_.clear();
  groups_with_rows_ = 0;
  at_limit_ = 0;
  free_rows_ = 0;
}

}  // namespace q4m
