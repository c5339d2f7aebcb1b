#include "core/policy/group_order.h"

#include <algorithm>

namespace q4m {

void GroupOrder::add(RowId id, std::string_view key, const RowLookup& lookup) {
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
    groups_[it->second].key = it->first;
  }
  Group& g = groups_[it->second];
  if (g.rows.empty() || g.rows.back() < id) {
    g.rows.push_back(id);  // the usual case: a new row
  } else {
    auto at = std::lower_bound(g.rows.begin(), g.rows.end(), id);
    if (at == g.rows.end() || *at != id) g.rows.insert(at, id);
  }
  g.members++;
  Member& m = member_[id];
  m.slot = it->second;
  note_out(m, lookup(id));
  update(it->second, lookup);
}

void GroupOrder::remove(RowId id, const RowLookup& lookup) {
  auto m = member_.find(id);
  if (m == member_.end()) return;
  const uint32_t slot = m->second.slot;
  Group& g = groups_[slot];
  if (m->second.out) g.out--;
  member_.erase(m);
  if (--g.members == 0) {  // the group is over; the same key later starts a new one
    if (g.ready) ready_.erase(g.ready);
    by_key_.erase(g.key);
    g = Group();
    free_slots_.push_back(slot);
    return;
  }
  if (g.rows.size() > 2 * g.members + 32) prune(g);
  update(slot, lookup);
}

void GroupOrder::refresh(RowId id, const RowLookup& lookup) {
  auto m = member_.find(id);
  if (m == member_.end()) return;
  note_out(m->second, lookup(id));
  update(m->second.slot, lookup);
}

void GroupOrder::refresh_all(const RowLookup& lookup) {
  for (auto& [id, m] : member_) note_out(m, lookup(id));
  for (uint32_t slot = 0; slot < groups_.size(); slot++)
    if (groups_[slot].members) update(slot, lookup);
}

void GroupOrder::update(uint32_t slot, const RowLookup& lookup) {
  Group& g = groups_[slot];
  while (!g.rows.empty() && !member_.count(g.rows.front())) g.rows.pop_front();
  // The first row still in line, unless a row is out; dead rows before it stay members (one
  // may come back to the queue if MAX_DELIVERIES is raised) but hold nothing up.
  RowId ready = 0;
  if (g.out == 0) {
    for (RowId id : g.rows) {
      if (!member_.count(id)) continue;
      const RowView v = lookup(id);
      if (!v.exists || !v.in_line) continue;
      if (v.free) ready = id;
      break;
    }
  }
  if (ready == g.ready) return;
  if (g.ready) ready_.erase(g.ready);
  g.ready = ready;
  if (ready) {
    ready_.insert(ready);
    newly_ready_.push_back(ready);
  }
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

void GroupOrder::clear() {
  by_key_.clear();
  groups_.clear();
  free_slots_.clear();
  member_.clear();
  ready_.clear();
  newly_ready_.clear();
}

}  // namespace q4m
