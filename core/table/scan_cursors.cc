#include "core/table/scan_cursors.h"

#include <algorithm>

namespace q4m {

template <class OnLive>
void ScanCursors::sweep(OnLive on_live) {
  ++sweeps_;
  for (auto it = cursors_.begin(); it != cursors_.end();) {
    if (it->second.filter.expired()) {
      it = cursors_.erase(it);
    } else {
      on_live(it->second);
      ++it;
    }
  }
  // The next sweep on adding waits until the live cursors have doubled: amortized O(1)
  // per new filter.
  sweep_above_ = std::max(kMinSweepSize, 2 * cursors_.size());
}

ScanCursors::RowId* ScanCursors::cursor_for(const std::shared_ptr<const RowFilter>& filter) {
  auto it = cursors_.find(filter.get());
  if (it == cursors_.end()) {
    if (cursors_.size() >= sweep_above_) sweep([](Cursor&) {});  // drop dead filters' cursors
    it = cursors_.emplace(filter.get(), Cursor{filter, 0}).first;
  }
  Cursor& c = it->second;
  if (c.filter.owner_before(filter) || filter.owner_before(c.filter) || c.filter.expired()) {
    c.filter = filter;  // a dead filter's address reused: start over
    c.next = 0;
  }
  return &c.next;
}

void ScanCursors::row_returned(RowId id) {
  sweep([id](Cursor& c) {
    if (c.next > id) c.next = id;
  });
}

void ScanCursors::clear() {
  cursors_.clear();
  sweep_above_ = kMinSweepSize;
}

}  // namespace q4m
