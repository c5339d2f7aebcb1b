// SnapshotJournal: what a table's commits changed since the oldest open snapshot
// (snapshots.h), kept only while one is open: the first id each commit inserted, and each
// row removed, with where its bytes are (its file stays open while the journal holds it,
// across a compaction or TRUNCATE). With it the table gives the rows it held at a point:
// the rows it holds now below the first id inserted after the point, and the rows removed
// after the point. Guarded by the table's state lock.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/file/row_check.h"
#include "core/row/row_id.h"

namespace q4m {

class DataFile;

// A row as a snapshot reads it: where its bytes are, and in which file.
struct SnapshotRow {
  RowLocation location;
  std::shared_ptr<DataFile> file;
};

class SnapshotJournal {
 public:
  // Kept only when a snapshot's point may lie since the last one kept: a point's boundary is
  // the first insert after it (one entry per snapshot, not per commit).
  void inserted(uint64_t ticket, RowId first);
  // Past settings().snapshot_journal_rows rows, the rows kept so far are dropped: the
  // snapshots that needed them cannot read this table any more (readable()).
  void removed(uint64_t ticket, SnapshotRow row);
  // Whether a snapshot at `point` can still be read here.
  bool readable(uint64_t point) const { return point >= lost_before_; }
  // Rows with this id or a higher one were inserted after `point`.
  RowId boundary(uint64_t point) const;
  // fn(row) for each row removed after `point` that was there at it.
  template <typename Fn>
  void each_removed_after(uint64_t point, Fn fn) const {
    const RowId below = boundary(point);
    for (const Removed& r : removed_)
      if (r.ticket > point && r.row.location.id < below) fn(r.row);
  }
  // Forgets what no open snapshot needs: changes at or before `oldest` (every change, when
  // no snapshot is open).
  void prune(uint64_t oldest);
  bool empty() const { return inserted_.empty() && removed_.empty(); }

 private:
  struct Removed {
    uint64_t ticket;
    SnapshotRow row;
  };
  std::vector<std::pair<uint64_t, RowId>> inserted_;  // (ticket, first id), in ticket order
  std::vector<Removed> removed_;
  uint64_t lost_before_ = 0;  // snapshots at points below it lost rows they needed
};

}  // namespace q4m
