// Leases: a row whose owner neither ends nor aborts it in time goes back to the queue.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/table/reaper.h"
#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// Waits (up to 5 s) until `t` has counted `n` lease expiries; false if it never does.
bool wait_for_expiries(QueueTable& t, uint64_t n) {
  for (int i = 0; i < 5000 && t.counters().lease_expiries.get() < n; i++)
    std::this_thread::sleep_for(milliseconds(1));
  return t.counters().lease_expiries.get() >= n;
}

}  // namespace

TEST(an_expired_lease_hands_the_row_to_a_waiter_and_its_owner_cannot_end_it) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {});
  REQUIRE(t);
  RowId id;
  REQUIRE(insert1(*t, "job", &id).ok());
  Consumer a, b;
  a.set_lease(milliseconds(50));
  REQUIRE(take(a, t));
  std::thread waiter([&] { CHECK(take(b, t, milliseconds(10000))); });
  waiter.join();  // b got the row only because a's lease ran out
  CHECK_EQ(b.owned_rowid(), id);
  CHECK_EQ(t->counters().lease_expiries.get(), 1u);
  CHECK_EQ(t->info().owned_rows, 1u);

  Status s = a.end();
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("row " + std::to_string(id)) != std::string::npos);
  CHECK(s.message().find("0.05 s") != std::string::npos);
  CHECK(!a.owner_mode());
  CHECK(a.end().code() == ErrorCode::kNotOwner);  // owner mode was left
  CHECK_EQ(t->info().rows, 1u);                      // a's failed end removed nothing

  REQUIRE(b.end().ok());  // b took it without a lease
  CHECK_EQ(t->info().rows, 0u);
}

TEST(a_row_ended_in_time_never_expires) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"one", "two"});
  REQUIRE(t);
  Consumer a;
  a.set_lease(milliseconds(300));
  REQUIRE(take(a, t));
  REQUIRE(a.end().ok());
  a.set_lease(milliseconds(0));
  REQUIRE(take(a, t));  // no lease on this one
  std::this_thread::sleep_for(milliseconds(600));
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);
  CHECK(a.owner_mode());
  CHECK(a.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(queue_wait_after_an_expired_lease_reports_it_once_then_waits_again) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {});
  REQUIRE(t);
  RowId id;
  REQUIRE(insert1(*t, "job", &id).ok());
  Consumer a;
  a.set_lease(milliseconds(20));
  REQUIRE(take(a, t));
  REQUIRE(wait_for_expiries(*t, 1));
  CHECK_EQ(t->info().owned_rows, 0u);  // back in the queue
  int idx = -1;
  Status s = a.wait({{t, nullptr}}, milliseconds(0), &idx);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(!a.owner_mode());
  a.set_lease(milliseconds(0));
  REQUIRE(take(a, t));  // the same row, delivered again
  CHECK_EQ(a.owned_rowid(), id);
  REQUIRE(a.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(abort_after_an_expired_lease_succeeds_and_the_row_is_queued_once) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a, b, c;
  a.set_lease(milliseconds(20));
  REQUIRE(take(a, t));
  REQUIRE(wait_for_expiries(*t, 1));
  CHECK(a.abort().ok());
  CHECK(!a.owner_mode());
  CHECK(take(b, t));
  CHECK(!take(c, t));  // not twice
  CHECK(b.end().ok());
}

TEST(a_row_handed_to_a_waiting_consumer_is_leased_too) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {});
  REQUIRE(t);
  Consumer a;
  a.set_lease(milliseconds(30));
  std::thread producer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    insert1(*t, "late");
  });
  REQUIRE(take(a, t, milliseconds(10000)));  // handed over by the producer
  producer.join();
  REQUIRE(wait_for_expiries(*t, 1));
  CHECK(a.end().code() == ErrorCode::kLeaseExpired);
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
}

TEST(disconnect_and_truncate_with_a_leased_row) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"one", "two"});
  REQUIRE(t);
  {
    Consumer gone;
    gone.set_lease(milliseconds(1000));
    REQUIRE(take(gone, t));
  }  // disconnect: the row is back at once, and its deadline is stale
  CHECK_EQ(t->info().owned_rows, 0u);
  Consumer a;
  a.set_lease(milliseconds(1000));  // long enough for a TRUNCATE on a busy disk
  REQUIRE(take(a, t));
  REQUIRE(t->truncate().ok());
  std::this_thread::sleep_for(milliseconds(1300));  // past both deadlines
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);
  CHECK(a.end().ok());  // the row vanished with TRUNCATE, as without a lease
  CHECK_EQ(t->info().rows, 0u);
}

TEST(the_reaper_restarts_after_stop_and_expires_what_was_due_meanwhile) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"one", "two"});
  REQUIRE(t);
  Consumer a, b;
  a.set_lease(milliseconds(200));
  REQUIRE(take(a, t));
  Reaper::instance().stop();  // as at plugin unload
  std::this_thread::sleep_for(milliseconds(400));
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);  // nobody to expire it
  b.set_lease(milliseconds(10000));
  REQUIRE(take(b, t));  // a new deadline starts the reaper, which scans at once
  REQUIRE(wait_for_expiries(*t, 1));
  CHECK(a.end().code() == ErrorCode::kLeaseExpired);
  CHECK(b.end().ok());
}

TEST(many_leases_ended_in_time_never_expire) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = table_with(dir.file("t"), {});
  REQUIRE(t);
  Consumer a;
  a.set_lease(milliseconds(60000));
  for (int i = 0; i < 5000; i++) {
    REQUIRE(insert1(*t, "r").ok());
    REQUIRE(take(a, t));
    REQUIRE(a.end().ok());
  }
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);
  CHECK_EQ(t->info().rows, 0u);
}

// Consumers whose work sometimes outlasts a short lease: every row is ended successfully
// exactly once (a consumer whose lease ran out learns it and does not count the row), and
// none is lost.
TEST(short_leases_under_concurrency_end_every_row_exactly_once) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = table_with(dir.file("t"), {});
  REQUIRE(t);
  const int kRows = 600, kConsumers = 6;
  for (int i = 0; i < kRows; i++) REQUIRE(insert1(*t, std::to_string(i)).ok());
  std::mutex mu;
  std::map<RowId, int> ended;
  std::atomic<int> done{0}, expired_ends{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kConsumers; k++)
    threads.emplace_back([&, k] {
      std::mt19937 rng(k);
      Consumer c;
      c.set_lease(milliseconds(3));
      while (done.load() < kRows) {
        int idx = 0;
        Status s = c.wait({{t, nullptr}}, milliseconds(20), &idx);
        if (s.code() == ErrorCode::kLeaseExpired) {
          expired_ends++;
          continue;
        }
        if (!s.ok() || idx == 0) continue;
        const RowId id = c.owned_rowid();
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 6000));  // the work
        Status e = c.end();
        if (e.ok()) {
          std::lock_guard<std::mutex> g(mu);
          ended[id]++;
          done++;
        } else {
          CHECK(e.code() == ErrorCode::kLeaseExpired);
          expired_ends++;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK_EQ(ended.size(), static_cast<size_t>(kRows));
  int twice = 0;
  for (auto& kv : ended) twice += kv.second != 1;
  CHECK_EQ(twice, 0);
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().owned_rows, 0u);
  CHECK(expired_ends.load() > 0);  // the leases did run out, or this tested nothing
  CHECK_EQ(t->counters().lease_expiries.get(), static_cast<uint64_t>(expired_ends.load()));
}


TEST(renew_lease_moves_the_deadline_and_can_start_a_lease) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"one", "two"});
  REQUIRE(t);
  Consumer a;
  a.set_lease(milliseconds(500));
  REQUIRE(take(a, t));
  REQUIRE(a.renew_lease(milliseconds(10000)).ok());
  std::this_thread::sleep_for(milliseconds(800));  // well past the first deadline
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);
  REQUIRE(a.end().ok());

  a.set_lease(milliseconds(0));
  REQUIRE(take(a, t));  // no lease...
  REQUIRE(a.renew_lease(milliseconds(20)).ok());  // ...until now
  REQUIRE(wait_for_expiries(*t, 1));
  Status s = a.renew_lease(milliseconds(1000));
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("0.02 s") != std::string::npos);
  CHECK(!a.owner_mode());
  CHECK(a.renew_lease(milliseconds(1000)).code() == ErrorCode::kNotOwner);
  REQUIRE(take(a, t));
  CHECK(a.renew_lease(milliseconds(0)).code() == ErrorCode::kInvalid);
  CHECK(a.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}
