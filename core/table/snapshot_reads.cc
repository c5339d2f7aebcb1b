// A consistent snapshot's read of a table (core/table/snapshots.h): the rows it holds now
// below the first id a commit after the point inserted, and the rows commits after the
// point removed (SnapshotJournal), each read from the file it was in.
#include <algorithm>
#include <limits>

#include "core/table/snapshots.h"
#include "core/table/table.h"
#include "core/util/settings.h"

namespace q4m {

template <typename Live, typename Gone>
Status Table::each_at_point(uint64_t point, Live live, Gone gone) {
  // Every commit queued before the point (its ticket is not above it) is published first:
  // a barrier behind them.
  if (Status s = sync_commits(); !s.ok()) return s;
  auto st = state_.lock();
  if (!st->journal.readable(point))
    return Status(ErrorCode::kInvalid,
                  "file " + path() + ": this consistent snapshot is too old: more than " +
                      std::to_string(settings().snapshot_journal_rows.load()) +
                      " rows were removed from the table since it began (queue_snapshot_journal_rows); start "
                      "it again, raise that variable, or dump with --lock-tables");
  const RowId below = st->journal.boundary(point);
  for (size_t pos = 0, end = st->index.end_pos(); pos < end; pos++) {
    const RowEntry& e = st->index.at(pos);
    if (e.id >= below) break;
    if (queued(e.state) || held(e.state)) live(*st, e);
  }
  st->journal.each_removed_after(point, gone);
  return Status::Ok();
}

Status Table::snapshot_rows(uint64_t point, std::vector<SnapshotRow>* rows) {
  rows->clear();
  Status s = each_at_point(
      point, [&](const State& st, const RowEntry& e) { rows->push_back(SnapshotRow{st.locate(e), st.file}); },
      [&](const SnapshotRow& r) { rows->push_back(r); });
  std::sort(rows->begin(), rows->end(),
            [](const SnapshotRow& a, const SnapshotRow& b) { return a.location.id < b.location.id; });
  return s;
}

Status Table::snapshot_count(uint64_t point, uint64_t* count) {
  *count = 0;
  return each_at_point(
      point, [&](const State&, const RowEntry&) { ++*count; }, [&](const SnapshotRow&) { ++*count; });
}

RowId Table::snapshot_upcoming_id(uint64_t point) {
  // The first id a commit after the point gave (rows ask for ids at or above the next one,
  // so it is never below); none: the table's now. After the barrier, as a read.
  const Status s = sync_commits();
  auto st = state_.lock();
  const RowId after = s.ok() ? st->journal.boundary(point) : std::numeric_limits<RowId>::max();
  return after == std::numeric_limits<RowId>::max() ? ids().upcoming() : after;
}

Status Table::read_snapshot_row(const SnapshotRow& row, std::string* payload) {
  const RowLocation& r = row.location;
  Status s = row.file->read(r.offset, r.disk_length(), payload);
  if (s.ok()) s = check_row(r, row.file->path(), payload->data());
  payload->resize(r.length);
  return s;
}

void Table::prune_snapshot_journal() {
  auto st = state_.lock();
  st->journal.prune(Snapshots::oldest());
}

}  // namespace q4m
