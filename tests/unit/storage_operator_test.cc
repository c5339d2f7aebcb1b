// The operators' calls (the monitor's dashboard): release_owned, redrive_dead, purge_dead,
// row_view, and the counters the metrics read (dead letters, consumed/aborted rows, the
// hand-out wait histogram).
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// A table holding `rows` with MAX_DELIVERIES=1, every row of which is dead.
std::shared_ptr<QueueTable> all_dead(const std::string& path, std::initializer_list<const char*> rows,
                                     std::vector<RowId>* ids) {
  auto t = table_with(path, rows, ids);
  if (!t) return nullptr;
  set_option(*t, &TableOptions::max_deliveries, 1);
  for (size_t i = 0; i < rows.size(); i++) {
    Consumer c;
    if (!take(c, t) || !c.abort().ok()) return nullptr;
  }
  return t->info().dead_rows == rows.size() ? t : nullptr;
}

}  // namespace

TEST(a_released_row_goes_to_the_next_consumer_and_its_owner_is_told_like_after_an_expired_lease) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"job"}, &ids);
  REQUIRE(t);
  Consumer hung(7), next(8);
  REQUIRE(take(hung, t));
  size_t released = 0;
  REQUIRE(t->release_owned(ids[0], 99, &released).ok());
  CHECK_EQ(released, 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
  REQUIRE(take(next, t));
  CHECK_EQ(next.owned_rowid(), ids[0]);
  CHECK_EQ(next.owned_delivery_count(), 2u);  // its count goes on, as after an expired lease

  Status s = hung.end();
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("given back to the queue by connection 99") != std::string::npos);
  CHECK(s.message().find("was not removed") != std::string::npos);
  CHECK(!hung.owner_mode());  // and it left owner mode: its next statement works
  REQUIRE(next.end().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->counters().rows_released.get(), 1u);
}

TEST(release_takes_back_a_whole_batch_and_the_owners_next_wait_reports_it) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c"}, &ids);
  REQUIRE(t);
  Consumer owner(5);
  size_t taken = 0;
  REQUIRE(owner.wait_batch({t, nullptr}, 3, milliseconds(0), &taken).ok());
  REQUIRE(taken == 3u);
  size_t released = 0;
  REQUIRE(t->release_owned(ids[1], 6, &released).ok());
  CHECK_EQ(released, 3u);
  CHECK_EQ(t->info().owned_rows, 0u);
  int index = 0;
  Status s = owner.wait({{t, nullptr}}, milliseconds(0), &index);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("the batch of 3 rows") != std::string::npos);
  CHECK_EQ(t->info().rows, 3u);  // none was removed
}

TEST(release_of_a_row_nobody_owns_gives_back_nothing_and_abort_after_release_succeeds) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a"}, &ids);
  REQUIRE(t);
  size_t released = 9;
  REQUIRE(t->release_owned(ids[0], 1, &released).ok());
  CHECK_EQ(released, 0u);
  REQUIRE(t->release_owned(12345, 1, &released).ok());
  CHECK_EQ(released, 0u);
  Consumer c;
  REQUIRE(take(c, t));
  REQUIRE(t->release_owned(ids[0], 1, &released).ok());
  CHECK_EQ(released, 1u);
  CHECK(c.abort().ok());  // as after an expired lease: the row is back already
  CHECK_EQ(t->info().rows, 1u);
}

// Whichever comes first wins: an end() committed before the release removed the row; after
// it, the end() is refused. Never both (a row removed in the file yet handed out again).
TEST(release_racing_with_the_owners_end_never_removes_a_row_that_went_back) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  int removed_by_owner = 0, released_rows = 0;
  for (int i = 0; i < 200; i++) {
    RowId id = 0;
    REQUIRE(insert1(*t, "r" + std::to_string(i), &id).ok());
    Consumer owner(1);
    REQUIRE(take(owner, t));
    Status end_status;
    std::thread ender([&] { end_status = owner.end(); });
    size_t released = 0;
    REQUIRE(t->release_owned(id, 2, &released).ok());
    ender.join();
    CHECK(end_status.ok() != (released == 1));  // exactly one of them
    removed_by_owner += end_status.ok();
    released_rows += static_cast<int>(released);
    if (released) {  // back in the queue: consume it
      Consumer other;
      REQUIRE(take(other, t));
      REQUIRE(other.end().ok());
    }
    CHECK_EQ(t->info().rows, 0u);
  }
  // After a crash, the file must agree: every row removed once, none left.
  auto copy = crash_copy(dir, dir.file("t"), "copy");
  REQUIRE(copy);
  CHECK_EQ(copy->info().rows, 0u);
  CHECK_EQ(removed_by_owner + released_rows, 200);
  std::printf("  (owner first %d times, release first %d times)\n", removed_by_owner, released_rows);
}

TEST(redrive_queues_dead_rows_again_as_new_rows_with_their_age_and_no_deliveries) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = all_dead(dir.file("t"), {"x", "y", "z"}, &ids);
  REQUIRE(t);
  CHECK_EQ(t->counters().rows_dead_lettered.get(), 3u);
  const uint64_t age_before = t->info().oldest_age_ms;  // x's
  size_t moved = 0;
  REQUIRE(t->redrive_dead(2, &moved).ok());  // the two oldest
  CHECK_EQ(moved, 2u);
  CHECK_EQ(t->info().dead_rows, 1u);
  CHECK_EQ(t->info().rows, 3u);
  CHECK(t->info().oldest_ready_age_ms >= age_before);  // insert times kept: x is the oldest ready row
  auto rows = scan(*t);
  REQUIRE(rows.size() == 3u);
  CHECK_EQ(rows[0].first, ids[2]);  // the dead one stays where it was; the copies go last
  CHECK(rows[1].first > ids[2]);
  CHECK_EQ(rows[1].second, "x");
  CHECK_EQ(rows[2].second, "y");
  Consumer c;
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_delivery_count(), 1u);  // a fresh start under MAX_DELIVERIES
  CHECK_EQ(c.owned_rowid(), rows[1].first);
  REQUIRE(c.abort().ok());
  CHECK_EQ(t->info().dead_rows, 2u);  // and dies again at its limit

  // The file agrees after a crash: the copies queued (with their count), no dead originals.
  auto copy = crash_copy(dir, dir.file("t"), "copy");
  REQUIRE(copy);
  set_option(*copy, &TableOptions::max_deliveries, 1);
  CHECK_EQ(copy->info().rows, 3u);
  CHECK_EQ(copy->info().dead_rows, 2u);
  REQUIRE(copy->redrive_dead(100, &moved).ok());
  CHECK_EQ(moved, 2u);
  CHECK_EQ(copy->info().dead_rows, 0u);
  CHECK_EQ(copy->counters().rows_redriven.get(), 2u);
}

TEST(redrive_of_a_full_table_replaces_rows_without_taking_room) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = all_dead(dir.file("t"), {"a", "b"}, &ids);
  REQUIRE(t);
  set_option(*t, &TableOptions::max_rows, 2);
  size_t moved = 0;
  REQUIRE(t->redrive_dead(10, &moved).ok());
  CHECK_EQ(moved, 2u);
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(t->info().dead_rows, 0u);
}

TEST(purge_removes_dead_rows_only_and_durably) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = all_dead(dir.file("t"), {"a", "b"}, &ids);
  REQUIRE(t);
  REQUIRE(insert1(*t, "alive").ok());
  size_t purged = 0;
  REQUIRE(t->purge_dead(1, &purged).ok());
  CHECK_EQ(purged, 1u);
  REQUIRE(t->purge_dead(100, &purged).ok());
  CHECK_EQ(purged, 1u);
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().dead_rows, 0u);
  CHECK_EQ(t->counters().rows_purged.get(), 2u);
  auto copy = crash_copy(dir, dir.file("t"), "copy");
  REQUIRE(copy);
  CHECK_EQ(copy->info().rows, 1u);
}

TEST(row_view_tells_queued_delayed_dead_and_owned_rows_apart) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"dead", "delayed", "owned", "queued"}, &ids);
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 2);
  Consumer a, b;
  for (int i = 0; i < 2; i++) {  // the first row dies at its second return
    REQUIRE(take(a, t));
    REQUIRE(a.abort().ok());
  }
  REQUIRE(take_and_delay(a, t, milliseconds(60000)) == ids[1]);
  REQUIRE(take(b, t));
  CHECK(t->row_view(ids[0], nullptr) == QueueTable::RowView::kDead);
  CHECK(t->row_view(ids[1], nullptr) == QueueTable::RowView::kDelayed);
  CHECK(t->row_view(ids[2], &b) == QueueTable::RowView::kOwnedByViewer);
  CHECK(t->row_view(ids[2], &a) == QueueTable::RowView::kHeld);
  CHECK(t->row_view(ids[3], nullptr) == QueueTable::RowView::kQueued);
  CHECK(t->row_view(99999, nullptr) == QueueTable::RowView::kGone);
}

TEST(counters_count_rows_consumed_aborted_and_the_wait_before_first_handout) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c", "d"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(20));
  Consumer c;
  size_t taken = 0;
  REQUIRE(c.wait_batch({t, nullptr}, 2, milliseconds(0), &taken).ok());
  REQUIRE(c.end().ok());  // one call, two rows
  REQUIRE(take(c, t));
  REQUIRE(c.abort().ok());
  REQUIRE(take(c, t));  // the aborted row again: not a first hand-out
  REQUIRE(c.end().ok());
  const TableCounters& k = t->counters();
  CHECK_EQ(k.rows_consumed.get(), 3u);
  CHECK_EQ(k.ends.get(), 2u);
  CHECK_EQ(k.rows_aborted.get(), 1u);
  CHECK_EQ(k.handout_wait.count(), 3u);          // a, b, c handed out for the first time
  CHECK(k.handout_wait.sum_ms() >= 3 * 20u);     // each waited at least the 20 ms slept
  CHECK_EQ(k.handout_wait.cumulative(0), 0u);     // none within 1 ms
  CHECK_EQ(k.handout_wait.cumulative(WaitHistogram::kBuckets - 1), 3u);
}

TEST(wait_histogram_buckets_are_cumulative_with_inclusive_bounds) {
  WaitHistogram h;
  h.observe(0);
  h.observe(1);        // <= 1 ms
  h.observe(2);        // <= 5 ms
  h.observe(3600000);  // the last finite bucket
  h.observe(3600001);  // +Inf
  CHECK_EQ(h.cumulative(0), 2u);
  CHECK_EQ(h.cumulative(1), 3u);
  CHECK_EQ(h.cumulative(WaitHistogram::kBoundsMs.size() - 1), 4u);
  CHECK_EQ(h.count(), 5u);
  CHECK_EQ(h.sum_ms(), 7200004u);
}

TEST(a_redriven_row_of_a_message_group_goes_to_its_groups_end) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::message_group, key_label_column("grp"));
  set_option(*t, &TableOptions::max_deliveries, 1);
  std::vector<RowId> ids;
  for (const char* label : {"a1", "a2"}) {
    RowId id = 0;
    REQUIRE(insert1(*t, key_label_row("a", label), &id).ok());
    ids.push_back(id);
  }
  {
    Consumer c;
    REQUIRE(take(c, t));  // a1, which dies: a2 is its group's next row
    REQUIRE(c.owned_rowid() == ids[0]);
    REQUIRE(c.abort().ok());
  }
  size_t moved = 0;
  REQUIRE(t->redrive_dead(10, &moved).ok());
  REQUIRE(moved == 1u);
  Consumer c, d;
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[1]);  // a2 first: the copy is behind it
  CHECK(!take(d, t));                 // and waits while a2 is out
  REQUIRE(c.end().ok());
  REQUIRE(take(d, t));
  CHECK(d.owned_rowid() > ids[1]);
  auto rows = scan(*t, &d);
  REQUIRE(rows.size() == 1u);
  CHECK_EQ(rows[0].second, key_label_row("a", "a1"));
}
