// Batch consume (Consumer::wait_batch, queue_wait_batch()): one connection owns several
// rows of one table; end() removes them in one commit, abort/release/lease expiry return
// them all.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/util/stats.h"
#include "check.h"
#include "prefix_filter.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

std::shared_ptr<QueueTable> table_with_rows(TempDir& dir, int n, const char* prefix = "row") {
  auto t = create_and_open(dir.file("t"));
  for (int i = 1; t && i <= n; i++)
    if (!insert1(*t, prefix + std::to_string(i)).ok()) return nullptr;
  return t;
}

size_t take_batch(Consumer& c, const std::shared_ptr<QueueTable>& t, size_t max_rows,
                  milliseconds timeout = milliseconds(0), std::shared_ptr<const RowFilter> filter = nullptr) {
  size_t taken = 0;
  Status s = c.wait_batch({t, std::move(filter)}, max_rows, timeout, &taken);
  return s.ok() ? taken : static_cast<size_t>(-1);
}

std::vector<std::string> payloads(const std::vector<std::pair<RowId, std::string>>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.second);
  return out;
}

}  // namespace

TEST(a_batch_takes_up_to_max_rows_in_order_and_its_owner_sees_exactly_them) {
  TempDir dir;
  auto t = table_with_rows(dir, 10);
  REQUIRE(t);
  Consumer a, b;
  REQUIRE(take_batch(a, t, 4) == 4);
  CHECK(a.owner_mode());
  CHECK_EQ(a.owned_count(), 4u);
  CHECK_EQ(a.owned_rowid(), 1u);  // the lowest
  CHECK(payloads(scan(*t, &a)) == (std::vector<std::string>{"row1", "row2", "row3", "row4"}));
  CHECK_EQ(t->visible_count(&a), 4u);
  CHECK_EQ(t->info().owned_rows, 4u);
  // Nobody else sees them; a second batch gets the next rows.
  CHECK_EQ(scan(*t, &b).size(), 6u);
  REQUIRE(take_batch(b, t, 100) == 6);
  CHECK(payloads(scan(*t, &b)).front() == "row5");
  CHECK_EQ(take_batch(b, t, 1), 0u);  // consumes b's batch first; a's rows are not free
  CHECK_EQ(t->info().rows, 4u);
}

TEST(a_batch_takes_what_is_free_now_and_waits_only_for_the_first_row) {
  TempDir dir;
  auto t = table_with_rows(dir, 3);
  REQUIRE(t);
  Consumer a;
  CHECK_EQ(take_batch(a, t, 10), 3u);  // does not wait to fill the batch
  REQUIRE(a.end().ok());
  CHECK(!a.owner_mode());
  CHECK_EQ(take_batch(a, t, 10), 0u);  // empty, timeout 0
  CHECK(a.owner_mode());  // owning no row, as after a timed-out wait()
  CHECK_EQ(a.owned_count(), 0u);
  std::thread producer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    insert1(*t, "late");
  });
  CHECK_EQ(take_batch(a, t, 10, milliseconds(10000)), 1u);  // handed over, then nothing more
  producer.join();
  CHECK(payloads(scan(*t, &a)) == std::vector<std::string>{"late"});
  CHECK(a.end().ok());
  size_t n = 7;
  CHECK(a.wait_batch({t, nullptr}, 0, milliseconds(0), &n).code() == ErrorCode::kInvalid);
  CHECK_EQ(n, 0u);
}

TEST(end_removes_a_batch_in_one_durable_commit) {
  TempDir dir;
  SyncModeScope sync(SyncMode::kFdatasync);
  auto t = table_with_rows(dir, 50);
  REQUIRE(t);
  Consumer a;
  REQUIRE(take_batch(a, t, 40) == 40);
  const uint64_t commits = global_stats().group_commits.get();
  const uint64_t syncs = global_stats().sys_sync.get();
  REQUIRE(a.end().ok());
  CHECK_EQ(global_stats().group_commits.get() - commits, 1u);
  CHECK_EQ(global_stats().sys_sync.get() - syncs, 1u);
  CHECK_EQ(t->info().rows, 10u);
  CHECK_EQ(t->counters().rows_removed.get(), 40u);
  // The next wait on a batch also ends the previous one in one commit.
  REQUIRE(take_batch(a, t, 5) == 5);
  REQUIRE(take_batch(a, t, 5) == 5);
  CHECK_EQ(t->info().rows, 5u);
  // What was ended stays removed after a reopen; what was owned comes back.
  t.reset();
  Status st;
  t = reopen(dir.file("t"), &st);
  REQUIRE(t);
  CHECK(payloads(scan(*t)) == (std::vector<std::string>{"row46", "row47", "row48", "row49", "row50"}));
}

TEST(abort_and_release_return_every_row_of_a_batch_and_count_the_delivery) {
  TempDir dir;
  auto t = table_with_rows(dir, 6);
  REQUIRE(t);
  Consumer a, b;
  REQUIRE(take_batch(a, t, 3) == 3);
  for (RowId id = 1; id <= 3; id++) CHECK_EQ(a.delivery_count_of(id), 1u);
  CHECK_EQ(a.delivery_count_of(4), 0u);  // not its row
  REQUIRE(a.abort().ok());
  CHECK(!a.owner_mode());
  CHECK_EQ(t->info().owned_rows, 0u);
  REQUIRE(take_batch(b, t, 6) == 6);
  for (RowId id = 1; id <= 3; id++) CHECK_EQ(b.delivery_count_of(id), 2u);
  for (RowId id = 4; id <= 6; id++) CHECK_EQ(b.delivery_count_of(id), 1u);
  CHECK_EQ(b.owned_delivery_count(), 2u);  // of the lowest row
  {
    Consumer c;
    REQUIRE(b.abort().ok());
    REQUIRE(take_batch(c, t, 6) == 6);
  }  // c goes away: its rows return
  CHECK_EQ(t->info().owned_rows, 0u);
  CHECK_EQ(scan(*t).size(), 6u);
}

TEST(a_filtered_batch_takes_only_matching_rows) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  for (int i = 1; i <= 20; i++) REQUIRE(insert1(*t, std::string(i % 3 == 0 ? "hot" : "cold") + std::to_string(i)).ok());
  Consumer a;
  auto hot = std::make_shared<PrefixFilter>("hot");
  REQUIRE(take_batch(a, t, 4, milliseconds(0), hot) == 4);
  CHECK(payloads(scan(*t, &a)) == (std::vector<std::string>{"hot3", "hot6", "hot9", "hot12"}));
  REQUIRE(take_batch(a, t, 100, milliseconds(0), hot) == 2);  // hot15, hot18
  REQUIRE(a.end().ok());
  CHECK_EQ(t->info().rows, 14u);
  CHECK_EQ(take_batch(a, t, 100, milliseconds(0), hot), 0u);
}

TEST(an_expired_lease_returns_the_whole_batch) {
  TempDir dir;
  auto t = table_with_rows(dir, 5);
  REQUIRE(t);
  Consumer a, b;
  a.set_lease(milliseconds(40));
  REQUIRE(take_batch(a, t, 3) == 3);
  // b waits for rows; only the expiry of a's lease frees any.
  REQUIRE(take_batch(b, t, 2) == 2);  // rows 4, 5
  REQUIRE(b.end().ok());
  CHECK_EQ(take_batch(b, t, 10, milliseconds(10000)), 3u);  // all three at once, after the expiry
  CHECK_EQ(t->counters().lease_expiries.get(), 3u);
  Status s = a.end();
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("batch of 3 rows from row 1") != std::string::npos);
  CHECK(!a.owner_mode());
  CHECK_EQ(t->info().owned_rows, 3u);  // b's
  REQUIRE(b.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(renewing_the_lease_of_a_batch_keeps_every_row) {
  TempDir dir;
  auto t = table_with_rows(dir, 4);
  REQUIRE(t);
  Consumer a;
  a.set_lease(milliseconds(1000));  // long enough for a loaded machine to reach the renewal
  REQUIRE(take_batch(a, t, 4) == 4);
  REQUIRE(a.renew_lease(milliseconds(10000)).ok());
  std::this_thread::sleep_for(milliseconds(1500));
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);
  CHECK_EQ(t->info().owned_rows, 4u);
  REQUIRE(a.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(a_short_lease_expiring_while_a_batch_fills_leaves_no_row_stranded) {
  // The batch's lease may run out while wait_batch is still adding rows: every row must
  // go back without any further call by the consumer (it may hang), and no row may stay
  // owned by a consumer that has left owner mode.
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string> rows(20000, "r");
  std::vector<std::string_view> views(rows.begin(), rows.end());
  REQUIRE(t->insert(views, nullptr).ok());
  for (int round = 0; round < 5; round++) {
    Consumer a;
    a.set_lease(milliseconds(1));
    CHECK(take_batch(a, t, rows.size()) > 0);
    for (int i = 0; i < 2000 && t->info().owned_rows > 0; i++) std::this_thread::sleep_for(milliseconds(1));
    CHECK_EQ(t->info().owned_rows, 0u);  // all back, with no help from a
    CHECK(a.end().code() == ErrorCode::kLeaseExpired);
    CHECK(!a.owner_mode());
  }
  CHECK_EQ(t->info().rows, rows.size());
}

TEST(a_deleted_row_of_a_batch_disappears_from_it) {
  TempDir dir;
  auto t = table_with_rows(dir, 4);
  REQUIRE(t);
  Consumer a;
  REQUIRE(take_batch(a, t, 3) == 3);
  REQUIRE(t->claim_for_delete(&a, 2));  // DELETE ... WHERE of one of its rows
  REQUIRE(t->remove_claimed(&a).ok());
  CHECK(payloads(scan(*t, &a)) == (std::vector<std::string>{"row1", "row3"}));
  CHECK_EQ(t->visible_count(&a), 2u);
  CHECK(!t->claim_for_delete(&a, 4));  // not its row: invisible in owner mode
  REQUIRE(a.end().ok());
  CHECK(payloads(scan(*t)) == std::vector<std::string>{"row4"});
}

TEST(batches_under_concurrency_deliver_every_row_exactly_once) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  constexpr int kProducers = 3, kConsumers = 5, kPerProducer = 3000;
  std::mutex mu;
  std::map<std::string, int> consumed;
  std::atomic<int> done_producers{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; p++)
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; i++) insert1(*t, std::to_string(p) + ":" + std::to_string(i));
      done_producers++;
    });
  for (int k = 0; k < kConsumers; k++)
    threads.emplace_back([&, k] {
      std::mt19937 rng(k);
      Consumer c;
      if (k == 0) c.set_lease(milliseconds(2));  // this one's batches often expire
      for (;;) {
        size_t taken = 0;
        Status s = c.wait_batch({t, nullptr}, 1 + rng() % 50, milliseconds(50), &taken);
        if (s.code() == ErrorCode::kLeaseExpired) continue;  // its rows went back
        if (!s.ok()) break;
        if (taken == 0) {
          if (done_producers == kProducers && t->info().rows == 0) break;
          continue;
        }
        std::vector<std::pair<RowId, std::string>> rows = scan(*t, &c);
        if (rng() % 5 == 0) {
          c.abort();
          continue;
        }
        if (!c.end().ok()) continue;  // expired: nothing was removed
        std::lock_guard<std::mutex> lock(mu);
        for (auto& r : rows) consumed[r.second]++;
      }
    });
  for (auto& th : threads) th.join();
  CHECK_EQ(consumed.size(), static_cast<size_t>(kProducers * kPerProducer));
  int twice = 0;
  for (auto& e : consumed) twice += e.second != 1;
  CHECK_EQ(twice, 0);
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().owned_rows, 0u);
}


