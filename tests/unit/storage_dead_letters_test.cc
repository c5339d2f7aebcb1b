// MAX_DELIVERIES (TableOptions::max_deliveries, Consumer::take_dead): a row back from its
// last allowed delivery is dead: kept, visible, deletable, handed out by take_dead() only.
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// Takes the first row with a new consumer and gives it back `times` times.
void deliver_and_abort(const std::shared_ptr<QueueTable>& t, int times) {
  for (int i = 0; i < times; i++) {
    Consumer c;
    if (!take(c, t)) return;
    (void)c.abort();
  }
}

// A new table at `path` holding `rows`, MAX_DELIVERIES=1, whose first row is dead already.
std::shared_ptr<QueueTable> table_with_dead_first_row(const std::string& path, std::initializer_list<const char*> rows,
                                                      std::vector<RowId>* ids = nullptr) {
  auto t = table_with(path, rows, ids);
  if (!t) return nullptr;
  set_option(*t, &TableOptions::max_deliveries, 1);
  deliver_and_abort(t, 1);
  return t->info().dead_rows == 1 ? t : nullptr;
}

bool take_dead(Consumer& c, const std::shared_ptr<QueueTable>& t) {
  bool taken = false;
  return c.take_dead(t, &taken).ok() && taken;
}

}  // namespace

TEST(a_row_back_from_its_last_delivery_is_dead_and_only_take_dead_hands_it_out) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"poison"}, &ids);
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 2);
  deliver_and_abort(t, 1);
  CHECK_EQ(t->info().dead_rows, 0u);  // one delivery: still queued
  deliver_and_abort(t, 1);
  CHECK_EQ(t->info().dead_rows, 1u);
  CHECK_EQ(t->info().rows, 1u);

  Consumer a;
  CHECK(!take(a, t));               // a dead row is not handed out
  CHECK_EQ(scan(*t).size(), 1u);    // but seen by scans (SELECT, DELETE)
  REQUIRE(take_dead(a, t));
  CHECK_EQ(a.owned_rowid(), ids[0]);
  CHECK_EQ(a.owned_delivery_count(), 3u);
  CHECK_EQ(t->info().dead_rows, 0u);
  REQUIRE(a.abort().ok());          // back among the dead
  CHECK_EQ(t->info().dead_rows, 1u);
  REQUIRE(take_dead(a, t));
  REQUIRE(a.end().ok());            // purged
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().dead_rows, 0u);
  CHECK(!take_dead(a, t));
}

TEST(every_way_back_to_the_queue_kills_a_row_at_its_limit) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"delayed", "leased", "disconnected"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 1);
  {
    Consumer c;
    REQUIRE(take(c, t));
    REQUIRE(c.abort(milliseconds(60000)).ok());  // a retry backoff: no retry is left
  }
  CHECK_EQ(t->info().dead_rows, 1u);
  CHECK_EQ(t->info().delayed_rows, 0u);
  {
    Consumer c;
    c.set_lease(milliseconds(20));
    REQUIRE(take(c, t));
    for (int i = 0; i < 5000 && t->info().dead_rows < 2; i++) std::this_thread::sleep_for(milliseconds(1));
    CHECK_EQ(t->info().dead_rows, 2u);  // its lease ran out
  }
  {
    Consumer c;
    REQUIRE(take(c, t));
  }  // the connection goes away with the row
  CHECK_EQ(t->info().dead_rows, 3u);
  Consumer d;
  CHECK(!take(d, t));
}

TEST(a_higher_limit_brings_dead_rows_back_and_a_lower_one_kills_queued_rows) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b"});
  REQUIRE(t);
  deliver_and_abort(t, 2);  // row a: 2 deliveries, queued (no limit yet)
  set_option(*t, &TableOptions::max_deliveries, 2);
  CHECK_EQ(t->info().dead_rows, 1u);  // queued at its limit: dead at once

  Consumer waiter;
  bool got = false;
  std::thread w([&] { got = take(waiter, t, milliseconds(10000)); });
  // Row b is free: the waiter takes it at once. Wait for it, then raise the limit with
  // the waiter asking again.
  w.join();
  REQUIRE(got);
  CHECK_EQ(waiter.owned_delivery_count(), 1u);
  std::thread w2([&] { got = take(waiter, t, milliseconds(10000)); });  // ends b, then waits
  for (int i = 0; i < 5000 && t->info().waiters == 0; i++) std::this_thread::sleep_for(milliseconds(1));
  set_option(*t, &TableOptions::max_deliveries, 3);  // row a lives again and goes to the waiter
  w2.join();
  CHECK(got);
  CHECK_EQ(waiter.owned_delivery_count(), 3u);
  CHECK_EQ(t->info().dead_rows, 0u);
  REQUIRE(waiter.abort().ok());  // its third delivery: dead again
  CHECK_EQ(t->info().dead_rows, 1u);
  set_option(*t, &TableOptions::max_deliveries, 0);  // no limit: nothing is dead
  CHECK_EQ(t->info().dead_rows, 0u);
  Consumer c;
  CHECK(take(c, t));
}

TEST(dead_rows_stay_dead_across_a_clean_restart_and_a_crash) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with(path, {"poison", "fine"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 2);
  deliver_and_abort(t, 2);
  REQUIRE(t->info().dead_rows == 1u);

  auto crashed = crash_copy(dir, path, "crashed");  // RETURN records only, no index snapshot
  REQUIRE(crashed);
  set_option(*crashed, &TableOptions::max_deliveries, 2);  // the engine applies the table's options at open
  CHECK_EQ(crashed->info().dead_rows, 1u);

  t.reset();
  crashed.reset();
  auto reopened = reopen(path);  // clean close: index snapshot
  REQUIRE(reopened);
  set_option(*reopened, &TableOptions::max_deliveries, 2);
  CHECK_EQ(reopened->info().dead_rows, 1u);
  Consumer c;
  REQUIRE(take(c, reopened));
  std::string payload;
  bool found = false;
  REQUIRE(reopened->read_row(c.owned_rowid(), &payload, &found).ok());
  CHECK_EQ(payload, std::string("fine"));
  REQUIRE(c.end().ok());
  CHECK(!take(c, reopened));
}

TEST(a_delete_that_gives_a_dead_row_back_leaves_it_dead) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with_dead_first_row(dir.file("t"), {"poison"}, &ids);
  REQUIRE(t);
  {
    Consumer deleter;
    REQUIRE(t->claim_for_delete(&deleter, ids[0]));
    CHECK_EQ(t->info().dead_rows, 0u);
  }  // its connection went away before the removal
  CHECK_EQ(t->info().dead_rows, 1u);
  Consumer deleter;
  REQUIRE(t->claim_for_delete(&deleter, ids[0]));
  REQUIRE(t->remove_claimed(&deleter).ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().dead_rows, 0u);
}

TEST(take_dead_first_ends_the_owned_row_like_a_wait) {
  TempDir dir;
  auto t = table_with_dead_first_row(dir.file("t"), {"poison", "fine"});
  REQUIRE(t);
  Consumer c;
  REQUIRE(take(c, t));  // "fine"
  REQUIRE(take_dead(c, t));  // ends "fine", takes "poison"
  CHECK_EQ(t->info().rows, 1u);
  REQUIRE(c.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(message_ttl_removes_dead_rows_too) {
  TempDir dir;
  auto t = table_with_dead_first_row(dir.file("t"), {"poison"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(20));
  set_option(*t, &TableOptions::message_ttl, milliseconds(10));
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().dead_rows, 0u);
}

TEST(truncate_leaves_no_dead_row_counted) {
  TempDir dir;
  auto t = table_with_dead_first_row(dir.file("t"), {"poison", "fine"});
  REQUIRE(t);
  REQUIRE(t->truncate().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().dead_rows, 0u);  // the counter once outlived its rows
  Consumer c;
  CHECK(!take_dead(c, t));
  REQUIRE(t->insert({"new"}, nullptr).ok());
  deliver_and_abort(t, 1);
  CHECK_EQ(t->info().dead_rows, 1u);
}

TEST(take_dead_hands_out_the_oldest_dead_row_whatever_the_order_they_died_in) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c"}, &ids);
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 1);
  {
    Consumer first, second;
    REQUIRE(take(first, t));
    REQUIRE(take(second, t));
    REQUIRE(second.abort().ok());  // b dies first...
    REQUIRE(first.abort().ok());   // ...then a
  }
  CHECK_EQ(t->info().dead_rows, 2u);
  Consumer admin;
  REQUIRE(take_dead(admin, t));
  CHECK_EQ(admin.owned_rowid(), ids[0]);
  REQUIRE(admin.abort().ok());    // still dead
  set_option(*t, &TableOptions::max_deliveries, 5);       // both back in the queue
  CHECK(!take_dead(admin, t));
  set_option(*t, &TableOptions::max_deliveries, 1);       // both dead again
  REQUIRE(take_dead(admin, t));
  CHECK_EQ(admin.owned_rowid(), ids[0]);
  REQUIRE(admin.end().ok());
  REQUIRE(take_dead(admin, t));
  CHECK_EQ(admin.owned_rowid(), ids[1]);
  REQUIRE(admin.end().ok());
  CHECK(!take_dead(admin, t));
  CHECK_EQ(t->info().rows, 1u);
}
