// Mixed concurrent load (inserts, consumers that end or abort, with or without a delay,
// compaction — concurrent and blocking — and automatic compaction) must leave a file whose reopen equals the
// state in memory: no row lost, none duplicated, none resurrected.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// unsynced_removals: durable inserts; one consumer waives its removals' sync
// (queue_sync_removals=OFF), so removals are answered before syncs made for inserts.
void run_mixed_load(bool concurrent_compaction, bool with_truncate, bool unsynced_removals = false) {
  SyncModeScope sync(unsynced_removals ? SyncMode::kFdatasync : SyncMode::kNone);
  const uint64_t early_before = global_stats().removals_answered_before_sync.get();
  auto& cfg = settings();
  bool old_concurrent = cfg.use_concurrent_compaction.load();
  uint64_t old_min = cfg.compaction_min_file_bytes.load(), old_interval = cfg.concurrent_compaction_interval.load();
  cfg.use_concurrent_compaction = concurrent_compaction;
  cfg.compaction_min_file_bytes = 256 * 1024;
  cfg.concurrent_compaction_interval = 64 * 1024;

  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> inserted, consumed;
  int duplicates = 0;
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; p++)
    threads.emplace_back([&, p] {
      std::string pad(200, 'x');
      for (int i = 0; !stop.load(); i++) {
        std::string row = std::to_string(p) + ":" + std::to_string(i) + ":" + pad;
        if (insert1(*t, row).ok()) {
          std::lock_guard<std::mutex> g(mu);
          inserted.insert(row);
        }
      }
    });
  for (int c = 0; c < 2; c++)
    threads.emplace_back([&, c] {
      std::mt19937 rng(c);
      Consumer con;
      con.set_sync_removals(!(unsynced_removals && c == 0));
      int idx;
      while (!stop.load()) {
        if (!con.wait({{t, nullptr}}, milliseconds(5), &idx).ok() || !idx) continue;
        if (rng() % 4 == 0) {  // give some back, half of them for 1-5 ms (queue_abort(delay))
          con.abort(rng() % 2 ? milliseconds(0) : milliseconds(1 + rng() % 5));
          continue;
        }
        std::string payload;
        bool found = false;
        t->read_row(con.owned_rowid(), &payload, &found);
        if (!con.end().ok()) continue;
        // A TRUNCATE between the take and the read took the row away: nothing was consumed
        // (two such reads used to count as a duplicate of the empty payload).
        if (!found) continue;
        std::lock_guard<std::mutex> g(mu);
        if (!consumed.insert(payload).second) {
          duplicates++;
          std::fprintf(stderr, "  consumed twice: %.40s\n", payload.c_str());
        }
      }
    });
  threads.emplace_back([&] {
    while (!stop.load()) {
      t->compact();
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  if (with_truncate)
    threads.emplace_back([&] {
      while (!stop.load()) {
        std::this_thread::sleep_for(milliseconds(50));
        t->truncate();
      }
    });
  // 800 ms, and on until a compaction ran (on a loaded machine the truncates kept the file
  // below compaction's size for the whole 800 ms: 3 of 300 runs beside other work).
  std::this_thread::sleep_for(milliseconds(800));
  for (int i = 0; i < 200 && t->counters().compactions.get() == 0; i++) std::this_thread::sleep_for(milliseconds(50));
  stop = true;
  for (auto& th : threads) th.join();
  cfg.use_concurrent_compaction = old_concurrent;
  cfg.compaction_min_file_bytes = old_min;
  cfg.concurrent_compaction_interval = old_interval;

  CHECK_EQ(duplicates, 0);
  CHECK_EQ(t->info().owned_rows, 0u);
  for (int i = 0; i < 500 && t->info().delayed_rows > 0; i++) std::this_thread::sleep_for(milliseconds(2));
  CHECK_EQ(t->info().delayed_rows, 0u);  // every delay ran out and its row is back
  auto in_memory = scan(*t);
  std::set<std::string> remaining;
  for (auto& r : in_memory) remaining.insert(r.second);
  if (!with_truncate) CHECK_EQ(remaining.size() + consumed.size(), inserted.size());
  for (auto& r : consumed) CHECK(remaining.count(r) == 0);
  CHECK(t->counters().compactions.get() > 0);
  const uint64_t early = global_stats().removals_answered_before_sync.get() - early_before;
  std::fprintf(stderr, "  %zu inserted, %zu consumed, %llu compactions, %llu removals answered before a sync\n",
               inserted.size(), consumed.size(), (unsigned long long)t->counters().compactions.get(),
               (unsigned long long)early);
  if (unsynced_removals) CHECK(early > 0);  // the path this variant is about ran
  uint64_t ins = t->counters().rows_inserted.get(), rem = t->counters().rows_removed.get();
  t.reset();
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  const auto reopened = scan(*t);
  CHECK(reopened == in_memory);
  if (reopened != in_memory) {  // what a rare failure needs to be understood (seen once in CI)
    std::fprintf(stderr, "  in memory %zu rows, reopened %zu rows\n", in_memory.size(), reopened.size());
    for (size_t i = 0; i < std::max(in_memory.size(), reopened.size()) && i < 8; i++)
      std::fprintf(stderr, "    %zu: memory %llu %.12s | reopened %llu %.12s\n", i,
                   i < in_memory.size() ? (unsigned long long)in_memory[i].first : 0ULL,
                   i < in_memory.size() ? in_memory[i].second.c_str() : "-",
                   i < reopened.size() ? (unsigned long long)reopened[i].first : 0ULL,
                   i < reopened.size() ? reopened[i].second.c_str() : "-");
  }
  CHECK_EQ(t->counters().rows_inserted.get(), ins);
  CHECK_EQ(t->counters().rows_removed.get(), rem);
}

}  // namespace

TEST(mixed_load_with_concurrent_compaction) { run_mixed_load(true, false); }
TEST(mixed_load_with_blocking_compaction) { run_mixed_load(false, false); }
TEST(mixed_load_with_truncates) { run_mixed_load(true, true); }
TEST(mixed_load_durable_with_unsynced_removals) { run_mixed_load(true, false, true); }
TEST(mixed_load_durable_with_unsynced_removals_and_truncates) { run_mixed_load(true, true, true); }
