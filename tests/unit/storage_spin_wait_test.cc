// SpinWait: a group-commit follower spins (yielding) for a bounded time before it
// sleeps, and never more followers at once than CPUs. Group commit stays correct
// whether followers spin, sleep, or both.
#include <thread>
#include <vector>

#include "core/util/spin_wait.h"
#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

struct SpinBudgetScope {
  explicit SpinBudgetScope(uint32_t us) : old(settings().commit_spin_us.load()) { settings().commit_spin_us = us; }
  ~SpinBudgetScope() { settings().commit_spin_us = old; }
  uint32_t old;
};

struct SpinCounts {
  uint64_t hits = global_stats().commit_spin_hits.get();
  uint64_t timeouts = global_stats().commit_spin_timeouts.get();
  uint64_t new_hits() const { return global_stats().commit_spin_hits.get() - hits; }
  uint64_t new_timeouts() const { return global_stats().commit_spin_timeouts.get() - timeouts; }
};

constexpr uint32_t kBusy = 0, kDone = 1;

}  // namespace

TEST(zero_budget_does_not_spin) {
  std::atomic<uint32_t> word{kBusy};
  SpinCounts before;
  CHECK(!SpinWait::spin_until_changed(word, kBusy, 0));
  CHECK_EQ(before.new_hits(), 0u);
  CHECK_EQ(before.new_timeouts(), 0u);
}

TEST(a_change_during_the_spin_ends_it) {
  std::atomic<uint32_t> word{kBusy};
  SpinCounts before;
  std::thread leader([&] {
    while (SpinWait::spinning_now() == 0) std::this_thread::yield();
    word.store(kDone, std::memory_order_release);
  });
  // A budget far longer than the test: only the change can end the spin.
  CHECK(SpinWait::spin_until_changed(word, kBusy, 60u * 1000 * 1000));
  leader.join();
  CHECK_EQ(before.new_hits(), 1u);
  CHECK_EQ(before.new_timeouts(), 0u);
  CHECK_EQ(SpinWait::spinning_now(), 0);
}

TEST(an_unchanged_word_ends_the_spin_after_the_budget) {
  std::atomic<uint32_t> word{kBusy};
  SpinCounts before;
  CHECK(!SpinWait::spin_until_changed(word, kBusy, 2000));
  CHECK_EQ(before.new_hits(), 0u);
  CHECK_EQ(before.new_timeouts(), 1u);
  CHECK_EQ(SpinWait::spinning_now(), 0);
}

TEST(no_more_spinners_than_cpus) {
  const int cpus = SpinWait::max_spinners();
  REQUIRE(cpus >= 1);
  std::atomic<uint32_t> word{kBusy};
  std::vector<std::thread> spinners;
  std::atomic<int> spun{0};
  for (int i = 0; i < cpus; i++)
    spinners.emplace_back([&] {
      if (SpinWait::spin_until_changed(word, kBusy, 60u * 1000 * 1000)) spun++;
    });
  while (SpinWait::spinning_now() < cpus) std::this_thread::yield();
  SpinCounts before;
  // Every slot is taken: the next caller must go to sleep at once, not spin.
  CHECK(!SpinWait::spin_until_changed(word, kBusy, 60u * 1000 * 1000));
  CHECK_EQ(before.new_timeouts(), 0u);
  word.store(kDone, std::memory_order_release);
  for (auto& t : spinners) t.join();
  CHECK_EQ(spun.load(), cpus);
  CHECK_EQ(SpinWait::spinning_now(), 0);
}

// Concurrent durable inserts with followers that only sleep, that spin long, and that
// spin too briefly for any sync (so they spin, then sleep): every insert succeeds once.
static void concurrent_inserts_succeed(uint32_t spin_us, bool expect_spins) {
  SyncModeScope sync(SyncMode::kFdatasync);
  SpinBudgetScope budget(spin_us);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  SpinCounts before;
  const int kThreads = 8, kPerThread = 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; i++)
    threads.emplace_back([&, i] {
      for (int k = 0; k < kPerThread; k++)
        if (!insert1(*t, std::to_string(i) + "/" + std::to_string(k)).ok()) failures++;
    });
  for (auto& th : threads) th.join();
  CHECK_EQ(failures.load(), 0);
  CHECK_EQ(t->info().rows, static_cast<uint64_t>(kThreads * kPerThread));
  if (expect_spins) CHECK(before.new_hits() + before.new_timeouts() > 0);
  else CHECK_EQ(before.new_hits() + before.new_timeouts(), 0u);
  CHECK_EQ(SpinWait::spinning_now(), 0);
}

TEST(group_commit_with_sleeping_followers) { concurrent_inserts_succeed(0, false); }
TEST(group_commit_with_spinning_followers) { concurrent_inserts_succeed(100000, true); }
TEST(group_commit_with_followers_that_spin_then_sleep) { concurrent_inserts_succeed(1, true); }
