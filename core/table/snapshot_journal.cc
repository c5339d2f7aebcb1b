#include "core/table/snapshot_journal.h"

#include <algorithm>
#include <limits>

namespace q4m {

RowId SnapshotJournal::boundary(uint64_t point) const {
  RowId first = std::numeric_limits<RowId>::max();
  for (const auto& [ticket, id] : inserted_)
    if (ticket > point) first = std::min(first, id);
  return first;
}

void SnapshotJournal::removed_after(uint64_t point, std::vector<SnapshotRow>* out) const {
  const RowId below = boundary(point);
  for (const Removed& r : removed_)
    if (r.ticket > point && r.row.location.id < below) out->push_back(r.row);
}

void SnapshotJournal::prune(uint64_t oldest) {
  inserted_.erase(std::remove_if(inserted_.begin(), inserted_.end(),
                                 [&](const std::pair<uint64_t, RowId>& e) { return e.first <= oldest; }),
                  inserted_.end());
  removed_.erase(std::remove_if(removed_.begin(), removed_.end(), [&](const Removed& r) { return r.ticket <= oldest; }),
                 removed_.end());
}

}  // namespace q4m
