// Group commit: concurrent inserts share syncs; ids are unique and increasing.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

TEST(eight_threads_share_syncs_ids_unique_and_increasing) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  const int kThreads = 8, kPerThread = 200;
  uint64_t syncs_before = global_stats().sys_sync.get();
  std::mutex mu;
  std::vector<std::vector<RowId>> per_thread(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; i++)
    threads.emplace_back([&, i] {
      for (int k = 0; k < kPerThread; k++) {
        RowId id;
        if (!insert1(*t, std::to_string(i) + "/" + std::to_string(k), &id).ok()) failures++;
        else per_thread[i].push_back(id);
      }
    });
  for (auto& th : threads) th.join();
  uint64_t syncs = global_stats().sys_sync.get() - syncs_before;
  CHECK_EQ(failures.load(), 0);
  std::set<RowId> all;
  for (auto& ids : per_thread) {
    CHECK(std::is_sorted(ids.begin(), ids.end()));  // each thread's later insert gets a later id
    all.insert(ids.begin(), ids.end());
  }
  CHECK_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  std::fprintf(stderr, "  %d inserts, %llu syncs\n", kThreads * kPerThread, (unsigned long long)syncs);
  CHECK(syncs < static_cast<uint64_t>(kThreads * kPerThread));
  CHECK(syncs > 0);
  // rows come back in id order with the right payloads after a reopen
  t.reset();
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  auto rows = scan(*t);
  CHECK_EQ(rows.size(), all.size());
  CHECK(std::is_sorted(rows.begin(), rows.end()));
}

TEST(multi_row_insert_is_one_commit) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string> storage(1000, "payload");
  std::vector<std::string_view> rows(storage.begin(), storage.end());
  std::vector<RowId> ids;
  uint64_t syncs_before = global_stats().sys_sync.get();
  const uint64_t sync_us_before = global_stats().sync_us.get();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(t->insert(rows, &ids).ok());
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  CHECK_EQ(global_stats().sys_sync.get() - syncs_before, 1u);
  // sync_us counts microseconds (not a finer unit): the sync took no longer than the INSERT.
  CHECK(global_stats().sync_us.get() - sync_us_before <= static_cast<uint64_t>(wall_us.count()) + 1);
  CHECK_EQ(ids.size(), 1000u);
  for (size_t i = 1; i < ids.size(); i++) CHECK_EQ(ids[i], ids[i - 1] + 1);
}

TEST(sync_none_does_not_sync) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  uint64_t syncs_before = global_stats().sys_sync.get();
  const uint64_t sync_us_before = global_stats().sync_us.get();
  for (int i = 0; i < 10; i++) REQUIRE(insert1(*t, "x").ok());
  CHECK_EQ(global_stats().sys_sync.get() - syncs_before, 0u);
  CHECK_EQ(global_stats().sync_us.get() - sync_us_before, 0u);
}

TEST(empty_insert_and_huge_row) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<RowId> ids{1, 2};
  REQUIRE(t->insert({}, &ids).ok());
  CHECK(ids.empty());
  std::string big(3u << 20, 'b');
  RowId id;
  REQUIRE(insert1(*t, big, &id).ok());
  std::string back;
  bool found;
  REQUIRE(t->read_row(id, &back, &found).ok());
  CHECK(found && back == big);
}

TEST(stats_snapshot_names) {
  auto snap = global_stats().snapshot();
  CHECK(!snap.empty());
  bool has_sync = false, has_sync_us = false;
  for (auto& kv : snap) {
    has_sync = has_sync || kv.first == "sys_sync";
    has_sync_us = has_sync_us || kv.first == "sync_us";
  }
  CHECK(has_sync);
  CHECK(has_sync_us);
}
