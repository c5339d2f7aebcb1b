// Basic queue-table behaviour: insert, scan, read, consume, reopen.
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

TEST(insert_scan_read) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string_view> rows{"a", "bb", ""};
  std::vector<RowId> ids;
  REQUIRE(t->insert(rows, &ids).ok());
  CHECK_EQ(ids.size(), 3u);
  CHECK(ids[0] < ids[1] && ids[1] < ids[2]);
  CHECK_EQ(t->visible_count(nullptr), 3u);
  auto all = scan(*t);
  REQUIRE(all.size() == 3);
  CHECK_EQ(all[1].second, "bb");
  CHECK_EQ(all[2].second, "");
  std::string p;
  bool found = false;
  REQUIRE(t->read_row(ids[1], &p, &found).ok());
  CHECK(found);
  CHECK_EQ(p, "bb");
  REQUIRE(t->read_row(12345, &p, &found).ok());
  CHECK(!found);
}

TEST(create_existing_is_kexists) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  CHECK(TableRegistry::instance().create(dir.file("t")).code() == ErrorCode::kExists);
}

TEST(acquire_missing_is_knotfound) {
  TempDir dir;
  std::shared_ptr<QueueTable> t;
  CHECK(TableRegistry::instance().acquire(dir.file("nope"), &t).code() == ErrorCode::kNotFound);
}

TEST(file_round_trip) {
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  std::string big(100000, 'x');
  RowId a, b, c;
  REQUIRE(insert1(*t, "first", &a).ok());
  REQUIRE(insert1(*t, big, &b).ok());
  REQUIRE(insert1(*t, "third", &c).ok());
  Consumer con;
  int idx = -1;
  REQUIRE(con.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(con.owned_rowid(), a);
  REQUIRE(con.end().ok());
  t.reset();
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  auto all = scan(*t);
  REQUIRE(all.size() == 2);
  CHECK_EQ(all[0].first, b);
  CHECK_EQ(all[0].second, big);
  CHECK_EQ(all[1].first, c);
  CHECK_EQ(t->info().next_rowid, c + 1);
  CHECK_EQ(t->counters().rows_inserted.get(), 3u);
  CHECK_EQ(t->counters().rows_removed.get(), 1u);
  RowId d;
  REQUIRE(insert1(*t, "fourth", &d).ok());
  CHECK(d > c);
}

TEST(consumer_wait_end_abort) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  RowId a, b;
  REQUIRE(insert1(*t, "a", &a).ok());
  REQUIRE(insert1(*t, "b", &b).ok());
  Consumer c1, c2;
  int idx = 0;
  REQUIRE(c1.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK(c1.owner_mode());
  CHECK_EQ(c1.owned_rowid(), a);
  // owner sees only its row; others do not see it
  auto mine = scan(*t, &c1);
  REQUIRE(mine.size() == 1);
  CHECK_EQ(mine[0].first, a);
  CHECK_EQ(t->visible_count(&c1), 1u);
  auto others = scan(*t, &c2);
  REQUIRE(others.size() == 1);
  CHECK_EQ(others[0].first, b);
  CHECK_EQ(t->visible_count(&c2), 1u);
  // abort returns it
  REQUIRE(c1.abort().ok());
  CHECK(!c1.owner_mode());
  CHECK_EQ(scan(*t, &c2).size(), 2u);
  CHECK(c1.abort().code() == ErrorCode::kNotOwner);
  CHECK(c1.end().code() == ErrorCode::kNotOwner);
  // wait again: gets the same first row; second wait consumes it and takes the next
  REQUIRE(c1.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  CHECK_EQ(c1.owned_rowid(), a);
  REQUIRE(c1.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  CHECK_EQ(c1.owned_rowid(), b);
  REQUIRE(c1.end().ok());
  CHECK_EQ(t->visible_count(nullptr), 0u);
  REQUIRE(c1.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 0);
  CHECK_EQ(c1.owned_count(), 0u);  // a timeout owns no row (owner mode all the same, as Q4M)
}

TEST(blocking_wait_gets_handoff) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  Consumer c;
  int idx = -1;
  Status s;
  std::thread waiter([&] { s = c.wait({{t, nullptr}}, std::chrono::seconds(10), &idx); });
  wait_for_waiters(*t);
  RowId id;
  REQUIRE(insert1(*t, "x", &id).ok());
  waiter.join();
  CHECK(s.ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(c.owned_rowid(), id);
  CHECK_EQ(t->info().waiters, 0u);
  CHECK_EQ(t->visible_count(nullptr), 0u);
  REQUIRE(c.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(next_row_sees_owned_and_claimed_rows) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  RowId a, b, c;
  REQUIRE(insert1(*t, "a", &a).ok());
  REQUIRE(insert1(*t, "b", &b).ok());
  REQUIRE(insert1(*t, "c", &c).ok());
  Consumer owner, deleter;
  int idx;
  REQUIRE(owner.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());  // owns a
  REQUIRE(t->claim_for_delete(&deleter, b));
  std::vector<RowId> ids;
  std::string p;
  RowId id = 0;
  bool found = true;
  while (t->next_row(id, &id, &p, &found, nullptr).ok() && found) ids.push_back(id);
  CHECK(ids == (std::vector<RowId>{a, b, c}));
  CHECK_EQ(scan(*t).size(), 1u);  // a normal scan sees only c
}
