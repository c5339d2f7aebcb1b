// The scan cursors of one table's filtered waits, one per compiled filter still in use:
// rows before a filter's cursor are known not to be Free-and-matching, so its next wait
// resumes there instead of at the head (docs/conditions.md, "Cost over a deep queue").
// Not thread-safe: it lives in the table's state, under the state lock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "core/row/filter.h"

namespace q4m {

class ScanCursors {
 public:
  using RowId = uint64_t;

  // The cursor of `filter`: starts at 0 for a filter not seen before (or a dead filter's
  // address reused). Adding one may first drop the cursors of filters nobody holds any
  // more; that sweep runs only once the map has doubled since the last one, so a table
  // with thousands of live filters (a condition string that changes every second) does
  // not pay a pass over all of them on every wait.
  RowId* cursor_for(const std::shared_ptr<const RowFilter>& filter);

  // Row `id` is Free again: cursors past it move back to it (dead filters' are dropped).
  void row_returned(RowId id);

  void clear();
  size_t size() const { return cursors_.size(); }
  uint64_t sweeps() const { return sweeps_; }  // for tests: passes over all cursors

  static constexpr size_t kMinSweepSize = 64;

 private:
  struct Cursor {
    std::weak_ptr<const RowFilter> filter;  // detects a new filter reusing a dead one's address
    RowId next = 0;
  };
  // One pass over all cursors: drops dead filters' cursors, calls on_live(cursor) for the rest.
  template <class OnLive>
  void sweep(OnLive on_live);

  std::unordered_map<const RowFilter*, Cursor> cursors_;
  size_t sweep_above_ = kMinSweepSize;
  uint64_t sweeps_ = 0;
};

}  // namespace q4m
