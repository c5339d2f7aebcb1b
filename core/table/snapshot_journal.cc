#include "core/table/snapshot_journal.h"

#include <algorithm>
#include <limits>

#include "core/table/snapshots.h"
#include "core/util/settings.h"

namespace q4m {

void SnapshotJournal::inserted(uint64_t ticket, RowId first) {
  // Points are never above the newest one: none lies between the last entry and this one.
  if (!inserted_.empty() && Snapshots::newest() < inserted_.back().first) return;
  inserted_.emplace_back(ticket, first);
}

void SnapshotJournal::removed(uint64_t ticket, SnapshotRow row) {
  if (removed_.size() >= settings().snapshot_journal_rows.load(std::memory_order_relaxed)) {
    for (const Removed& r : removed_) lost_before_ = std::max(lost_before_, r.ticket);
    lost_before_ = std::max(lost_before_, ticket);
    removed_.clear();
    return;
  }
  removed_.push_back(Removed{ticket, std::move(row)});
}

RowId SnapshotJournal::boundary(uint64_t point) const {
  RowId first = std::numeric_limits<RowId>::max();
  for (const auto& [ticket, id] : inserted_)
    if (ticket > point) first = std::min(first, id);
  return first;
}

void SnapshotJournal::prune(uint64_t oldest) {
  if (oldest >= lost_before_) lost_before_ = 0;  // no open snapshot lost anything
  inserted_.erase(std::remove_if(inserted_.begin(), inserted_.end(),
                                 [&](const std::pair<uint64_t, RowId>& e) { return e.first <= oldest; }),
                  inserted_.end());
  removed_.erase(std::remove_if(removed_.begin(), removed_.end(), [&](const Removed& r) { return r.ticket <= oldest; }),
                 removed_.end());
}

}  // namespace q4m
