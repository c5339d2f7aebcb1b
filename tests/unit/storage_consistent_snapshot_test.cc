// Consistent snapshots (core/table/snapshots.h): a table gives the rows it held at a
// snapshot's point, whatever its commits did since (consumed, inserted, compacted away,
// truncated), split where the commits were queued.
#include "check.h"

#include "core/table/consumer.h"
#include "core/table/snapshots.h"
#include "core/table/transaction.h"
#include "core/util/settings.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

// The payloads at `point`; "<error>" if a read failed.
std::vector<std::string> at_point(QueueTable& t, uint64_t point) {
  std::vector<SnapshotRow> rows;
  if (!t.snapshot_rows(point, &rows).ok()) return {"<error>"};
  std::vector<std::string> out;
  for (const SnapshotRow& r : rows) {
    std::string payload;
    out.push_back(t.read_snapshot_row(r, &payload).ok() ? payload : "<error>");
  }
  return out;
}

using Rows = std::vector<std::string>;

}  // namespace

TEST(a_snapshot_reads_the_rows_of_its_point_whatever_came_after) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c", "d"});
  REQUIRE(t);
  Consumer held;
  REQUIRE(take(held, t));  // "a" is owned at the point: in flight, so in the snapshot
  const uint64_t point = Snapshots::begin();
  REQUIRE(held.end().ok());  // consumed after the point
  Consumer c;
  REQUIRE(take(c, t));
  REQUIRE(c.end().ok());  // "b" too
  REQUIRE(insert1(*t, "e").ok());  // inserted after it
  CHECK(at_point(*t, point) == (Rows{"a", "b", "c", "d"}));
  REQUIRE(t->compact().ok());  // the removed rows' bytes are gone from the new file
  CHECK(at_point(*t, point) == (Rows{"a", "b", "c", "d"}));
  const uint64_t later = Snapshots::begin();
  CHECK(at_point(*t, later) == (Rows{"c", "d", "e"}));
  REQUIRE(t->truncate().ok());
  CHECK(at_point(*t, point) == (Rows{"a", "b", "c", "d"}));
  uint64_t count = 0;
  REQUIRE(t->snapshot_count(point, &count).ok());
  CHECK_EQ(count, 4u);  // COUNT(*) as the scan reads
  CHECK(at_point(*t, later) == (Rows{"c", "d", "e"}));
  Snapshots::end(point);
  Snapshots::end(later);
  CHECK(!Snapshots::any());
  t.reset();
  TableRegistry::instance().close_all();
}

// The point splits transactions where their commits were queued (the coordinator's commit
// order: MariaDB's commit_ordered, under the lock a snapshot begins under), not where they
// were written: a commit queued before the point is in the snapshot even if written after.
TEST(a_snapshot_splits_transactions_where_their_commits_were_queued) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b"});
  REQUIRE(t);
  Transaction before(1), after(2);
  Consumer c;
  REQUIRE(take(c, t));  // "a", ended by the transaction queued before the point
  REQUIRE(before.remove_owned(t, c.holder(), std::vector<RowId>{c.owned_rowid()}.data(), 1).ok());
  before.insert(t, "x");
  after.insert(t, "y");
  REQUIRE(before.prepare("xid-before").ok());
  REQUIRE(after.prepare("xid-after").ok());
  before.queue_commit(/*durable=*/false);
  const uint64_t point = Snapshots::begin();
  after.queue_commit(/*durable=*/false);
  REQUIRE(after.commit().ok());
  REQUIRE(before.commit().ok());
  CHECK(at_point(*t, point) == (Rows{"b", "x"}));
  Snapshots::end(point);
  t.reset();
  TableRegistry::instance().close_all();
}

// A table keeps at most queue_snapshot_journal_rows removed rows for open snapshots: past it
// the snapshots that needed them get an error naming the table (never a wrong read), and a
// snapshot begun after reads as before.
TEST(a_snapshot_that_lost_removed_rows_fails_instead_of_reading_wrong) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c", "d", "e"});
  REQUIRE(t);
  const uint64_t saved = settings().snapshot_journal_rows.load();
  settings().snapshot_journal_rows.store(2);
  const uint64_t point = Snapshots::begin();
  Consumer c;
  for (int i = 0; i < 3; i++) {
    REQUIRE(take(c, t));
    REQUIRE(c.end().ok());
  }
  std::vector<SnapshotRow> rows;
  const Status s = t->snapshot_rows(point, &rows);
  CHECK(!s.ok());
  CHECK(s.message().find("too old") != std::string::npos);
  CHECK(s.message().find(t->path()) != std::string::npos);
  const uint64_t later = Snapshots::begin();
  CHECK(at_point(*t, later) == (Rows{"d", "e"}));
  Snapshots::end(point);
  Snapshots::end(later);
  settings().snapshot_journal_rows.store(saved);
  t.reset();
  TableRegistry::instance().close_all();
}

// Many commits while a snapshot is open keep one first-insert entry per snapshot, and each
// snapshot still splits them right.
TEST(snapshots_between_many_commits_split_them_right) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<uint64_t> points;
  for (int i = 0; i < 50; i++) {
    if (i % 10 == 0) points.push_back(Snapshots::begin());
    REQUIRE(insert1(*t, std::to_string(i)).ok());
  }
  for (size_t k = 0; k < points.size(); k++) CHECK_EQ(at_point(*t, points[k]).size(), k * 10);
  for (uint64_t p : points) Snapshots::end(p);
  t.reset();
  TableRegistry::instance().close_all();
}
