// Fast open: a clean close leaves an index snapshot; it is used only when it matches
// the data file, and never survives the open that used it.
#include <cstdio>
#include <fstream>

#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

std::string idx(const std::string& path) { return path + ".idx"; }

// A table at `path` holding one row "x", closed cleanly (so it has an index snapshot).
void make_closed_table_with_one_row(const std::string& path) {
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(insert1(*t, "x").ok());
  t.reset();
  TableRegistry::instance().close_all();
}

}  // namespace

TEST(clean_close_then_fast_open_restores_everything) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  bool acc;
  for (int i = 1; i <= 30; i++) REQUIRE(insert1(*t, "row" + std::to_string(i)).ok());
  REQUIRE(relay1(*t, "relayed", 4, 99, false, &acc).ok());
  {
    Consumer c;
    int n;
    for (int i = 0; i < 10; i++) REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &n).ok());
    REQUIRE(c.end().ok());
    REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &n).ok());  // owned at close: returns to the queue
  }
  REQUIRE(t->compact().ok());
  auto before = scan(*t);
  TableStats info = t->info();
  uint64_t ins = t->counters().rows_inserted.get(), rem = t->counters().rows_removed.get();
  t.reset();
  TableRegistry::instance().close_all();
  CHECK(file_exists_for_test(idx(path)));
  uint64_t recoveries = global_stats().recoveries.get();
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(path, &r).ok());
  CHECK_EQ(global_stats().recoveries.get(), recoveries);  // no chunk walk
  CHECK(!file_exists_for_test(idx(path)));                // gone before anything can change
  CHECK(scan(*r) == before);
  CHECK_EQ(r->info().next_rowid, info.next_rowid);
  CHECK_EQ(r->info().file_bytes, info.file_bytes);
  CHECK_EQ(r->counters().rows_inserted.get(), ins);
  CHECK_EQ(r->counters().rows_removed.get(), rem);
  CHECK_EQ(r->last_relayed_rowid(4), 99u);
  // and the table works normally afterwards
  RowId id;
  REQUIRE(insert1(*r, "new", &id).ok());
  CHECK_EQ(id, info.next_rowid);
}

TEST(stale_or_damaged_snapshot_is_ignored) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  for (int i = 0; i < 5; i++) REQUIRE(insert1(*t, "a").ok());
  t.reset();
  TableRegistry::instance().close_all();
  std::string old_snapshot = read_file_bytes(idx(path));
  REQUIRE(!old_snapshot.empty());
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  for (int i = 0; i < 3; i++) REQUIRE(insert1(*t, "b").ok());
  t.reset();
  TableRegistry::instance().close_all();
  // Put back the snapshot of the older file: it must not hide the newer rows.
  write_file_bytes(idx(path), old_snapshot);
  uint64_t recoveries = global_stats().recoveries.get();
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(scan(*t).size(), 8u);
  CHECK_EQ(global_stats().recoveries.get(), recoveries + 1);
  t.reset();
  TableRegistry::instance().close_all();
  // A damaged snapshot of the right file is ignored too.
  std::string snap = read_file_bytes(idx(path));
  snap[snap.size() / 2] ^= 1;
  write_file_bytes(idx(path), snap);
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(scan(*t).size(), 8u);
  CHECK(!file_exists_for_test(idx(path)));
}

TEST(closed_table_refuses_writes_so_two_objects_never_append) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(insert1(*t, "a").ok());
  TableRegistry::instance().close_all();  // `t` is still held (e.g. by a connection)
  CHECK(file_exists_for_test(idx(path)));
  CHECK(insert1(*t, "b").code() == ErrorCode::kIo);
  CHECK(!t->compact().ok());
  CHECK_EQ(scan(*t).size(), 1u);  // reads still work
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(path, &r).ok());
  CHECK(r != t);
  REQUIRE(insert1(*r, "c").ok());
  CHECK_EQ(scan(*r).size(), 2u);
}

TEST(drop_and_rename_of_closed_table_handle_snapshot) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string a = dir.file("a"), b = dir.file("b");
  make_closed_table_with_one_row(a);
  REQUIRE(TableRegistry::instance().rename(a, b).ok());
  CHECK(!file_exists_for_test(idx(a)));
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(b, &r).ok());
  CHECK_EQ(scan(*r).size(), 1u);
  r.reset();
  TableRegistry::instance().close_all();
  REQUIRE(TableRegistry::instance().drop(b).ok());
  CHECK(!file_exists_for_test(idx(b)));
  CHECK(!file_exists_for_test(b));
}

// The server's DDL recovery replays the renames of an ALTER TABLE that a kill -9 cut short.
// A replayed rename whose file already moved must say "not found" (which recovery ignores),
// not "exists" (which it logs as an error), and must leave the moved table alone.
TEST(rename_replayed_after_the_file_moved_is_knotfound_and_harmless) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string a = dir.file("a"), b = dir.file("b");
  make_closed_table_with_one_row(a);
  REQUIRE(TableRegistry::instance().rename(a, b).ok());
  CHECK(TableRegistry::instance().rename(a, b).code() == ErrorCode::kNotFound);
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(b, &r).ok());
  CHECK_EQ(scan(*r).size(), 1u);
  // Both present is a real conflict, open or not.
  auto c = create_and_open(a);
  REQUIRE(c);
  CHECK(TableRegistry::instance().rename(a, b).code() == ErrorCode::kExists);
  c.reset();
  r.reset();
  TableRegistry::instance().close_all();
  CHECK(TableRegistry::instance().rename(a, b).code() == ErrorCode::kExists);
}

TEST(drop_with_data_file_missing_removes_snapshot_and_tmp) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  make_closed_table_with_one_row(path);  // leaves the .idx snapshot
  REQUIRE(file_exists_for_test(idx(path)));
  { std::ofstream(path + ".tmp") << "partial"; }  // as a crashed compaction leaves it
  REQUIRE(std::remove(path.c_str()) == 0);
  Status s = TableRegistry::instance().drop(path);
  CHECK(s.code() == ErrorCode::kNotFound);  // the engine treats this as dropped
  CHECK(!file_exists_for_test(idx(path)));
  CHECK(!file_exists_for_test(path + ".tmp"));
}
