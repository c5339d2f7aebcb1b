// queue_abort(delay): the row goes back to the queue but is handed out again only once the
// delay has passed. Until then it is queued (counted, visible, deletable), owned by no one.
#include <chrono>
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

TEST(a_delayed_row_stays_queued_and_comes_back_only_after_its_delay) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"first", "second"});
  REQUIRE(t);
  Consumer a, b, c;
  REQUIRE(take(a, t));
  const RowId first = a.owned_rowid();
  const auto aborted_at = std::chrono::steady_clock::now();
  REQUIRE(a.abort(milliseconds(300)).ok());
  CHECK(!a.owner_mode());
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(t->visible_count(nullptr), 2u);  // queued: others see it
  CHECK_EQ(scan(*t).size(), 2u);

  REQUIRE(take(b, t));  // the row after it is not held up
  CHECK(b.owned_rowid() != first);
  CHECK(!take(c, t));   // the delayed one is not handed out yet
  REQUIRE(take(c, t, milliseconds(10000)));  // a waiter gets it when the delay ends
  CHECK(std::chrono::steady_clock::now() - aborted_at >= milliseconds(300));
  CHECK_EQ(c.owned_rowid(), first);
  CHECK_EQ(c.owned_delivery_count(), 2u);  // the delay keeps its count
  CHECK_EQ(t->info().delayed_rows, 0u);
  CHECK(c.end().ok());
  CHECK(b.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(abort_without_a_delay_returns_the_row_at_once) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a, b;
  REQUIRE(take(a, t));
  REQUIRE(a.abort(milliseconds(0)).ok());
  CHECK_EQ(t->info().delayed_rows, 0u);
  CHECK(take(b, t));
}

TEST(a_delayed_batch_comes_back_whole_and_in_order) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c"});
  REQUIRE(t);
  Consumer a, b;
  size_t taken = 0;
  REQUIRE(a.wait_batch({t, nullptr}, 3, milliseconds(0), &taken).ok());
  REQUIRE(taken == 3);
  REQUIRE(a.abort(milliseconds(100)).ok());
  CHECK_EQ(t->info().delayed_rows, 3u);
  CHECK(!take(b, t));
  REQUIRE(b.wait_batch({t, nullptr}, 3, milliseconds(10000), &taken).ok());
  // The waiter is handed the first row as soon as it is due; the others join the batch if
  // they are due by then (the same deadline, one reaper pass).
  CHECK(taken >= 1);
  std::vector<std::string> got;
  for (const auto& row : scan(*t, &b)) got.push_back(row.second);
  CHECK(!got.empty() && got[0] == "a");
  REQUIRE(b.end().ok());
  Consumer c;
  while (take(c, t, milliseconds(2000))) REQUIRE(c.end().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().delayed_rows, 0u);
}

TEST(a_deleted_delayed_row_never_comes_back) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a, d, b;
  const RowId id = take_and_delay(a, t, milliseconds(100));
  REQUIRE(id);
  REQUIRE(t->claim_for_delete(&d, id));  // a DELETE may take a delayed row
  CHECK_EQ(t->info().delayed_rows, 0u);
  REQUIRE(t->remove_claimed(&d).ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK(!take(b, t, milliseconds(400)));  // its deadline passes with nothing to return
  CHECK_EQ(t->info().owned_rows, 0u);
}

TEST(a_delete_claim_given_up_keeps_the_delay) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a, b;
  const RowId id = take_and_delay(a, t, milliseconds(400));
  REQUIRE(id);
  {
    Consumer d;
    REQUIRE(t->claim_for_delete(&d, id));
    CHECK_EQ(t->info().owned_rows, 1u);
  }  // d goes away without removing it: the claim is released
  CHECK_EQ(t->info().owned_rows, 0u);
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK(!take(b, t));  // still delayed
  REQUIRE(take(b, t, milliseconds(10000)));
  CHECK_EQ(b.owned_rowid(), id);
  CHECK(b.end().ok());
}

TEST(a_delay_that_ends_under_a_delete_claim_leaves_the_claim_alone) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a, b;
  const RowId id = take_and_delay(a, t, milliseconds(50));
  REQUIRE(id);
  {
    Consumer d;
    REQUIRE(t->claim_for_delete(&d, id));
    std::this_thread::sleep_for(milliseconds(300));  // the deadline passes while claimed
    CHECK(!take(b, t));                               // still the DELETE's
    CHECK_EQ(t->info().owned_rows, 1u);
  }  // the claim is given up after the delay ended: the row is free at once
  CHECK_EQ(t->info().delayed_rows, 0u);
  REQUIRE(take(b, t));
  CHECK_EQ(b.owned_rowid(), id);
  CHECK(b.end().ok());
}

TEST(compaction_keeps_a_delayed_row_delayed_and_truncate_drops_it) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"gone", "job"});
  REQUIRE(t);
  Consumer a, b;
  REQUIRE(take(a, t));
  REQUIRE(a.end().ok());  // leaves something to compact away
  const RowId id = take_and_delay(a, t, milliseconds(300));
  REQUIRE(id);
  REQUIRE(t->compact().ok());
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK(!take(b, t));
  REQUIRE(take(b, t, milliseconds(10000)));
  CHECK_EQ(b.owned_rowid(), id);
  std::string payload;
  bool found = false;
  REQUIRE(t->read_row(id, &payload, &found).ok());
  CHECK(found && payload == "job");
  REQUIRE(b.abort(milliseconds(60000)).ok());
  REQUIRE(t->truncate().ok());
  CHECK_EQ(t->info().delayed_rows, 0u);
  CHECK_EQ(t->info().rows, 0u);
  REQUIRE(insert1(*t, "new").ok());
  CHECK(take(b, t));
}

// The delay is in the file (a RETURN record; at a clean close also the index snapshot):
// storage_returns_test.cc covers crashes and compaction.
TEST(a_reopened_table_keeps_a_delayed_row_delayed) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a;
  REQUIRE(take_and_delay(a, t, milliseconds(600000)));
  t.reset();
  t = reopen(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(t->info().delayed_rows, 1u);
  Consumer b;
  CHECK(!take(b, t));
}
