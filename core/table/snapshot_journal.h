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
  void inserted(uint64_t ticket, RowId first) { inserted_.emplace_back(ticket, first); }
  void removed(uint64_t ticket, SnapshotRow row) { removed_.push_back(Removed{ticket, std::move(row)}); }
  // Rows with this id or a higher one were inserted after `point`.
  RowId boundary(uint64_t point) const;
  // The rows removed after `point` that were there at it.
  void removed_after(uint64_t point, std::vector<SnapshotRow>* out) const;
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
};

}  // namespace q4m
