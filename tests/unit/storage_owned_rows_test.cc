// QueueTable::owned_rows(): who holds which row (INFORMATION_SCHEMA.QUEUE_OWNED_ROWS).
#include <atomic>
#include <thread>

#include "check.h"
#include "prefix_filter.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

std::vector<RowId> ids_of(const std::vector<OwnedRowInfo>& rows) {
  std::vector<RowId> ids;
  for (const OwnedRowInfo& r : rows) ids.push_back(r.id);
  return ids;
}

}  // namespace

TEST(owned_rows_lists_each_connections_row_with_its_delivery_count) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c"}, &ids);
  REQUIRE(t);
  CHECK(t->owned_rows().empty());
  Consumer a(7), b(9);
  CHECK_EQ(a.connection_id(), 7u);
  REQUIRE(take(a, t));
  REQUIRE(take(b, t));
  std::vector<OwnedRowInfo> rows = t->owned_rows();
  REQUIRE(rows.size() == 2);
  CHECK_EQ(rows[0].id, ids[0]);
  CHECK_EQ(rows[0].connection_id, 7u);
  CHECK_EQ(rows[0].deliveries, 1u);
  CHECK_EQ(rows[1].id, ids[1]);
  CHECK_EQ(rows[1].connection_id, 9u);
  CHECK_EQ(rows[0].lease_left_ms, -1);  // no lease

  REQUIRE(a.abort().ok());  // back to the queue; a takes it again: its second delivery
  REQUIRE(take(a, t));
  rows = t->owned_rows();
  REQUIRE(rows.size() == 2);
  CHECK_EQ(rows[0].id, ids[0]);
  CHECK_EQ(rows[0].deliveries, 2u);

  REQUIRE(a.end().ok());
  REQUIRE(b.end().ok());
  CHECK(t->owned_rows().empty());
}

TEST(owned_rows_reports_the_ages_and_the_lease_left) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"old"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(40));  // the row is older than its ownership
  Consumer a(1);
  a.set_lease(milliseconds(10000));
  REQUIRE(take(a, t));
  std::this_thread::sleep_for(milliseconds(30));
  std::vector<OwnedRowInfo> rows = t->owned_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].owned_ms >= 30);
  CHECK(rows[0].owned_ms < 5000);
  CHECK(rows[0].row_age_ms >= rows[0].owned_ms + 40);
  CHECK(rows[0].lease_left_ms > 5000);
  CHECK(rows[0].lease_left_ms <= 10000 - 30);

  REQUIRE(a.renew_lease(milliseconds(60000)).ok());
  rows = t->owned_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].lease_left_ms > 50000);
  REQUIRE(a.end().ok());
}

TEST(owned_rows_lists_every_row_of_a_batch_and_no_delete_claim) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c", "d"}, &ids);
  REQUIRE(t);
  Consumer batch(3), deleter(4);
  size_t taken = 0;
  REQUIRE(batch.wait_batch({t, nullptr}, 3, milliseconds(0), &taken).ok());
  REQUIRE(taken == 3);
  REQUIRE(t->claim_for_delete(&deleter, ids[3]));  // a DELETE in progress holds row d
  std::vector<OwnedRowInfo> rows = t->owned_rows();
  CHECK(ids_of(rows) == std::vector<RowId>(ids.begin(), ids.begin() + 3));
  for (const OwnedRowInfo& r : rows) CHECK_EQ(r.connection_id, 3u);
  REQUIRE(t->remove_claimed(&deleter).ok());
  REQUIRE(batch.end().ok());
  CHECK(t->owned_rows().empty());
}

// The index is read in slices (4,096 entries) with the lock released between them: a row
// owned far behind the front is found all the same.
TEST(owned_rows_finds_rows_far_from_the_front) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string> payloads;
  for (int i = 0; i < 10000; i++) payloads.push_back(i == 9000 ? "deep" : "row");
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  std::vector<RowId> ids;
  REQUIRE(t->insert(views, &ids).ok());
  Consumer front(1), deep(2);
  REQUIRE(take(front, t));
  int index = 0;
  REQUIRE(deep.wait({{t, std::make_shared<PrefixFilter>("deep")}}, milliseconds(0), &index).ok());
  REQUIRE(index == 1);
  std::vector<OwnedRowInfo> rows = t->owned_rows();
  CHECK(ids_of(rows) == (std::vector<RowId>{ids[0], ids[9000]}));
  REQUIRE(rows.size() == 2);
  CHECK_EQ(rows[1].connection_id, 2u);
}

// Consumers come and go (taking, ending, aborting, leases running out, connections closing)
// while another thread lists the owned rows: every listed row is one a live consumer took.
TEST(owned_rows_is_safe_while_consumers_come_and_go) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string> payloads(20000, "row");
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  REQUIRE(t->insert(views, nullptr).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> listed{0}, bad{0};
  std::thread lister([&] {
    while (!stop.load()) {
      for (const OwnedRowInfo& r : t->owned_rows()) {
        listed++;
        if (r.connection_id < 100 || r.connection_id >= 104 || r.deliveries == 0) bad++;
      }
    }
  });
  std::vector<std::thread> workers;
  for (uint64_t w = 0; w < 4; w++) {
    workers.emplace_back([&, w] {
      for (int round = 0; round < 300; round++) {
        Consumer c(100 + w);  // a new connection each round
        if (round % 3 == 0) c.set_lease(milliseconds(1));
        size_t taken = 0;
        if (!c.wait_batch({t, nullptr}, 1 + round % 4, milliseconds(0), &taken).ok() || taken == 0) continue;
        if (round % 5 == 0) std::this_thread::sleep_for(milliseconds(2));
        if (round % 2 == 0) (void)c.end();
        else if (round % 7 == 0) (void)c.abort();
        // otherwise the consumer's destructor gives the rows back
      }
    });
  }
  for (std::thread& w : workers) w.join();
  stop = true;
  lister.join();
  CHECK_EQ(bad.load(), 0u);
  CHECK(listed.load() > 0);
  CHECK(t->owned_rows().empty());
  CHECK_EQ(t->info().owned_rows, 0u);
}
