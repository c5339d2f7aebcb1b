#include "core/policy/dead_letters.h"

namespace q4m {

void DeadLetters::configure(const TableOptions& options, RowContext& ctx) {
  if (options.max_deliveries == max_) return;
  max_ = options.max_deliveries;
  for (size_t pos = 0, end = ctx.index.end_pos(); pos < end; pos++) {
    const RowEntry& e = ctx.index.at(pos);
    if (e.state == RowState::kDead) {
      if (!dies(e) && !damaged(e.id)) ctx.requeue(e.id);  // back in the queue, perhaps to a waiter
    } else if ((e.state == RowState::kFree || e.state == RowState::kDelayed) && dies(e)) {
      ctx.move(e.id, Move{RowState::kDead});
    }
  }
}

std::vector<RowId> DeadLetters::oldest(size_t max, bool copyable) const {
  std::vector<RowId> ids;
  for (auto it = dead_.begin(); it != dead_.end() && ids.size() < max; ++it)
    if (!copyable || !damaged(*it)) ids.push_back(*it);
  return ids;
}

}  // namespace q4m
