// MESSAGE_TTL (TableOptions::message_ttl): queued rows older than the TTL are removed and
// never handed out; a row a connection holds is left to it until it comes back.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

TEST(rows_already_past_the_ttl_are_removed_before_configure_returns) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"old1", "old2"});
  REQUIRE(t);
  // Margins of a second: on a loaded machine 100 ms between the insert and the configure
  // expired the young row too.
  std::this_thread::sleep_for(milliseconds(1200));
  REQUIRE(insert1(*t, "young").ok());
  set_option(*t, &TableOptions::message_ttl, milliseconds(1000));
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->counters().rows_expired.get(), 2u);
  Consumer c;
  REQUIRE(take(c, t));
  std::string row;
  bool found = false;
  REQUIRE(t->read_row(c.owned_rowid(), &row, &found).ok() && found);
  CHECK_EQ(row, std::string("young"));
}

TEST(a_queued_row_expires_when_its_ttl_runs_out_not_before) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::message_ttl, milliseconds(300));
  const auto inserted_at = std::chrono::steady_clock::now();
  REQUIRE(insert1(*t, "a").ok());
  REQUIRE(eventually([&] { return t->info().rows == 0; }));
  CHECK(std::chrono::steady_clock::now() - inserted_at >= milliseconds(300));
  CHECK_EQ(t->counters().rows_expired.get(), 1u);
  Consumer c;
  CHECK(!take(c, t));
  // A row inserted after the table was empty is watched again.
  REQUIRE(insert1(*t, "b").ok());
  REQUIRE(eventually([&] { return t->info().rows == 0; }));
  CHECK_EQ(t->counters().rows_expired.get(), 2u);
}

TEST(a_held_row_is_left_to_its_connection) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));
  Consumer a;
  REQUIRE(take(a, t));
  std::this_thread::sleep_for(milliseconds(300));  // several reaper passes past the TTL
  CHECK_EQ(t->info().rows, 1u);
  CHECK(a.end().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->counters().rows_expired.get(), 0u);
}

TEST(a_row_given_back_after_its_ttl_is_removed_instead_of_handed_out) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));
  Consumer a, b;
  REQUIRE(take(a, t));
  std::this_thread::sleep_for(milliseconds(200));
  std::thread waiter([&] { CHECK(!take(b, t, milliseconds(500))); });  // waits while it comes back
  std::this_thread::sleep_for(milliseconds(50));
  REQUIRE(a.abort().ok());
  waiter.join();
  REQUIRE(eventually([&] { return t->info().rows == 0; }));
  CHECK_EQ(t->counters().rows_expired.get(), 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
}

TEST(delayed_rows_expire_too) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  Consumer a;
  REQUIRE(take_and_delay(a, t, milliseconds(60000)));
  CHECK_EQ(t->info().delayed_rows, 1u);
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));
  REQUIRE(eventually([&] { return t->info().rows == 0; }));
  CHECK_EQ(t->info().delayed_rows, 0u);
  CHECK_EQ(t->counters().rows_expired.get(), 1u);
}

TEST(a_ttl_of_zero_turns_expiry_off) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"job"});
  REQUIRE(t);
  set_option(*t, &TableOptions::message_ttl, milliseconds(150));
  set_option(*t, &TableOptions::message_ttl, milliseconds(0));
  std::this_thread::sleep_for(milliseconds(400));
  CHECK_EQ(t->info().rows, 1u);
  Consumer a;
  CHECK(take(a, t));
}

TEST(expired_rows_stay_removed_after_a_reopen_and_old_rows_expire_at_open) {
  TempDir dir;
  const std::string path = dir.file("t");
  {
    auto t = table_with(path, {"a", "b"});
    REQUIRE(t);
    std::this_thread::sleep_for(milliseconds(150));
    set_option(*t, &TableOptions::message_ttl, milliseconds(100));
    CHECK_EQ(t->info().rows, 0u);
    REQUIRE(insert1(*t, "c").ok());
  }
  auto t = crash_copy(dir, path, "crashed");  // no TTL known yet: the removals of a and b come from the file
  REQUIRE(t);
  CHECK_EQ(t->info().rows, 1u);
  std::this_thread::sleep_for(milliseconds(150));
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));  // what the engine does when a statement opens it
  CHECK_EQ(t->info().rows, 0u);
  Consumer c;
  CHECK(!take(c, t));
}

TEST(expiry_asks_for_no_sync_in_a_durable_mode) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(150));
  const uint64_t syncs = global_stats().sys_sync.get();
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(global_stats().sys_sync.get(), syncs);
  auto crashed = crash_copy(dir, dir.file("t"), "crashed");  // a server crash keeps the written removal
  REQUIRE(crashed);
  CHECK_EQ(crashed->info().rows, 0u);
}

TEST(under_load_every_row_is_either_consumed_once_or_expired) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::message_ttl, milliseconds(20));  // about as long as a row waits here: many expire
  constexpr int kRows = 6000, kConsumers = 3;
  std::atomic<bool> producing{true};
  std::atomic<uint64_t> consumed{0};
  std::vector<std::vector<RowId>> taken(kConsumers);
  std::vector<std::thread> consumers;
  for (int k = 0; k < kConsumers; k++) {
    consumers.emplace_back([&, k] {
      Consumer c;
      while (producing.load() || t->info().rows > 0) {
        if (!take(c, t, milliseconds(10))) continue;
        taken[k].push_back(c.owned_rowid());
        if (k == 0 && taken[k].size() % 7 == 0) {  // now and then a retry, past the TTL or not
          CHECK(c.abort().ok());
          continue;
        }
        std::this_thread::sleep_for(milliseconds(1));  // slower than the producer: a backlog builds up
        CHECK(c.end().ok());
        consumed++;
      }
    });
  }
  for (int i = 0; i < kRows; i++) {
    REQUIRE(insert1(*t, "row " + std::to_string(i)).ok());
    if (i % 100 == 0) std::this_thread::sleep_for(milliseconds(2));
  }
  producing = false;
  for (auto& th : consumers) th.join();
  const uint64_t expired = t->counters().rows_expired.get();
  CHECK_EQ(consumed.load() + expired, static_cast<uint64_t>(kRows));
  CHECK(expired > 0);
  CHECK(consumed.load() > 0);
  CHECK_EQ(t->info().rows, 0u);
  // A row is taken again only after consumer 0 gave it back: never after an end.
  std::vector<RowId> all;
  for (const auto& v : taken) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); i++) {
    if (all[i] != all[i - 1]) continue;
    CHECK(std::find(taken[0].begin(), taken[0].end(), all[i]) != taken[0].end());
  }
}
