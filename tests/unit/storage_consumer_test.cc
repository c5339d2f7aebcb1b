// Consumers: owner mode, hand-off, priorities, filters, timeouts, interrupt, drop, truncate.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/table/transaction.h"
#include "core/util/blocking.h"
#include "core/row/filter.h"
#include "core/util/stats.h"
#include "check.h"
#include "prefix_filter.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

std::string owned_payload(QueueTable& t, const Consumer& c) {
  std::string p;
  bool found = false;
  t.read_row(c.owned_rowid(), &p, &found);
  return found ? p : "<none>";
}

}  // namespace

TEST(producers_and_consumers_consume_every_row_exactly_once) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  const int kProducers = 4, kConsumers = 4, kPerProducer = 2000;
  std::atomic<int> consumed{0};
  std::mutex mu;
  std::map<std::string, int> seen;
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; p++)
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; i++) insert1(*t, std::to_string(p) + ":" + std::to_string(i));
    });
  for (int c = 0; c < kConsumers; c++)
    threads.emplace_back([&] {
      Consumer con;
      int idx;
      while (consumed.load() < kProducers * kPerProducer) {
        if (!con.wait({{t, nullptr}}, milliseconds(50), &idx).ok() || idx == 0) continue;
        std::string payload = owned_payload(*t, con);
        {
          std::lock_guard<std::mutex> g(mu);
          seen[payload]++;
        }
        consumed++;
      }
      con.end();
    });
  for (auto& th : threads) th.join();
  CHECK_EQ(seen.size(), static_cast<size_t>(kProducers * kPerProducer));
  int dups = 0;
  for (auto& kv : seen) dups += kv.second != 1;
  CHECK_EQ(dups, 0);
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().owned_rows, 0u);
}

TEST(abort_returns_row_to_queue_and_to_a_waiter) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  RowId id;
  REQUIRE(insert1(*t, "only", &id).ok());
  Consumer a, b;
  int idx;
  REQUIRE(a.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(idx == 1);
  Status s;
  int bidx = -1;
  std::thread th([&] { s = b.wait({{t, nullptr}}, std::chrono::seconds(10), &bidx); });
  wait_for_waiters(*t, 1);
  REQUIRE(a.abort().ok());
  th.join();
  CHECK(s.ok());
  CHECK_EQ(bidx, 1);
  CHECK_EQ(b.owned_rowid(), id);
  CHECK(!a.owner_mode());
}

TEST(release_and_destructor_return_the_row) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  REQUIRE(insert1(*t, "r").ok());
  int idx;
  {
    Consumer a;
    REQUIRE(a.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
    CHECK_EQ(t->visible_count(nullptr), 0u);
    a.release();
    CHECK(!a.owner_mode());
    CHECK_EQ(t->visible_count(nullptr), 1u);
    a.release();  // twice is fine
    REQUIRE(a.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
    CHECK_EQ(idx, 1);
  }  // destructor returns it
  CHECK_EQ(t->visible_count(nullptr), 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
}

TEST(multi_subscription_priority_order) {
  TempDir dir;
  auto hi = create_and_open(dir.file("hi"));
  auto lo = create_and_open(dir.file("lo"));
  REQUIRE(hi && lo);
  REQUIRE(insert1(*lo, "lo1").ok());
  REQUIRE(insert1(*hi, "hi1").ok());
  REQUIRE(insert1(*lo, "lo2").ok());
  Consumer c;
  int idx;
  std::vector<Subscription> subs{{hi, nullptr}, {lo, nullptr}};
  REQUIRE(c.wait(subs, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK(c.owned_table() == hi.get());
  // owner mode: the other table looks empty, this one shows only the owned row
  CHECK_EQ(scan(*lo, &c).size(), 0u);
  CHECK_EQ(lo->visible_count(&c), 0u);
  CHECK_EQ(scan(*hi, &c).size(), 1u);
  REQUIRE(c.wait(subs, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 2);
  CHECK_EQ(owned_payload(*lo, c), "lo1");
  REQUIRE(c.wait(subs, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 2);
  CHECK_EQ(owned_payload(*lo, c), "lo2");
  REQUIRE(c.wait(subs, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 0);
  CHECK_EQ(hi->info().rows + lo->info().rows, 0u);
}

TEST(filters_select_rows_and_same_table_twice) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  for (const char* r : {"low-1", "high-1", "low-2", "high-2"}) REQUIRE(insert1(*t, r).ok());
  auto high = std::make_shared<PrefixFilter>("high");
  auto low = std::make_shared<PrefixFilter>("low");
  std::vector<Subscription> subs{{t, high}, {t, low}};
  Consumer c;
  int idx;
  std::vector<std::string> got;
  for (int i = 0; i < 4; i++) {
    REQUIRE(c.wait(subs, milliseconds(0), &idx).ok());
    got.push_back(std::to_string(idx) + owned_payload(*t, c));
  }
  CHECK(got == (std::vector<std::string>{"1high-1", "1high-2", "2low-1", "2low-2"}));
  REQUIRE(c.end().ok());
  // a filtered waiter is not handed rows that do not match
  Status s;
  int widx = -1;
  std::thread th([&] { s = c.wait({{t, high}}, std::chrono::seconds(10), &widx); });
  wait_for_waiters(*t, 1);
  REQUIRE(insert1(*t, "low-3").ok());
  REQUIRE(insert1(*t, "high-3").ok());
  th.join();
  CHECK(s.ok());
  CHECK_EQ(widx, 1);
  CHECK_EQ(owned_payload(*t, c), "high-3");
}

TEST(filter_cursor_resets_when_an_earlier_row_returns) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  for (int i = 0; i < 50; i++) REQUIRE(insert1(*t, "skip").ok());
  RowId want;
  REQUIRE(insert1(*t, "want", &want).ok());
  auto f = std::make_shared<PrefixFilter>("want");
  Consumer a, b;
  int idx;
  REQUIRE(a.wait({{t, f}}, milliseconds(0), &idx).ok());
  CHECK_EQ(a.owned_rowid(), want);
  REQUIRE(b.wait({{t, f}}, milliseconds(0), &idx).ok());  // cursor is past `want`
  CHECK_EQ(idx, 0);
  REQUIRE(a.abort().ok());  // `want` is Free again: the cursor must go back
  REQUIRE(b.wait({{t, f}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(b.owned_rowid(), want);
}

TEST(wait_timeout_zero_and_short) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  Consumer c;
  int idx = -1;
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 0);
  CHECK_EQ(t->info().waiters, 0u);
  // The original failed at once on waits under 1 s.
  t0 = std::chrono::steady_clock::now();
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(100), &idx).ok());
  auto waited = std::chrono::steady_clock::now() - t0;
  CHECK_EQ(idx, 0);
  CHECK(waited >= milliseconds(95));
  CHECK_EQ(t->info().waiters, 0u);
  // a huge timeout does not overflow; interrupt ends it
  Status s;
  std::thread th([&] { s = c.wait({{t, nullptr}}, milliseconds::max(), &idx); });
  wait_for_waiters(*t, 1);
  c.interrupt();
  th.join();
  CHECK(s.code() == ErrorCode::kInterrupted);
}

TEST(interrupt_wakes_wait_and_does_not_stick) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  Consumer c;
  c.interrupt();
  c.clear_interrupt();  // the engine does this at the start of each statement
  int idx = -1;
  Status s;
  std::thread th([&] { s = c.wait({{t, nullptr}}, std::chrono::seconds(30), &idx); });
  wait_for_waiters(*t, 1);
  c.interrupt();
  th.join();
  CHECK(s.code() == ErrorCode::kInterrupted);
  CHECK_EQ(t->info().waiters, 0u);
  REQUIRE(insert1(*t, "x").ok());
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());  // not interrupted again
  CHECK_EQ(idx, 1);
}

// A KILL that lands after the engine's thd_killed() check but before wait() registers
// must not be lost (the wait would otherwise run to its full timeout).
TEST(interrupt_before_wait_is_sticky_until_cleared) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  REQUIRE(insert1(*t, "x").ok());
  Consumer c;
  int idx = -1;
  c.interrupt();
  Status s = c.wait({{t, nullptr}}, std::chrono::seconds(30), &idx);
  CHECK(s.code() == ErrorCode::kInterrupted);
  CHECK_EQ(idx, 0);
  CHECK(!c.owner_mode());  // an interrupted wait takes no row
  CHECK_EQ(t->info().waiters, 0u);
  // Consumed: the next wait takes the row.
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  // A pending interrupt keeps the owned row (the wait does not end it first).
  c.interrupt();
  s = c.wait({{t, nullptr}}, std::chrono::seconds(30), &idx);
  CHECK(s.code() == ErrorCode::kInterrupted);
  CHECK(c.owner_mode());
  REQUIRE(c.abort().ok());
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());  // take the row again
  CHECK_EQ(idx, 1);
  REQUIRE(c.end().ok());
  // clear_interrupt() forgets a stale KILL: the wait times out normally.
  c.interrupt();
  c.clear_interrupt();
  s = c.wait({{t, nullptr}}, milliseconds(50), &idx);
  CHECK(s.ok());
  CHECK_EQ(idx, 0);
}

// The owner's SELECT reads its row's payload from the tail cache while the row is among
// the newest bytes of the file, and with a single pread otherwise (index gives
// offset+length): here after a reopen, which starts with an empty cache.
TEST(reading_the_owned_row_is_one_pread_at_most) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(insert1(*t, std::string(3000, 'p')).ok());
  REQUIRE(insert1(*t, std::string(2000, 'q')).ok());
  for (int round = 0; round < 2; round++) {
    Consumer c;
    int idx = -1;
    REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
    REQUIRE(idx == 1);
    RowId id = 0;
    std::string payload;
    bool found = false;
    uint64_t reads = global_stats().sys_read.get();
    REQUIRE(t->next_visible(&c, 0, &id, &payload, &found).ok());
    CHECK(found);
    CHECK_EQ(payload, round == 0 ? std::string(3000, 'p') : std::string(2000, 'q'));
    CHECK_EQ(global_stats().sys_read.get() - reads, round == 0 ? 0u : 1u);
    REQUIRE(c.end().ok());
    if (round == 0) {
      t.reset();
      t = reopen(path);
      REQUIRE(t);
    }
  }
}

TEST(drop_while_waiting_is_kdropped) {
  TempDir dir;
  std::string path = dir.file("gone");
  auto t = create_and_open(path);
  auto other = create_and_open(dir.file("other"));
  REQUIRE(t && other);
  Consumer c;
  int idx = -1;
  Status s;
  std::thread th([&] { s = c.wait({{other, nullptr}, {t, nullptr}}, std::chrono::seconds(30), &idx); });
  wait_for_waiters(*t, 1);
  REQUIRE(TableRegistry::instance().drop(path).ok());
  th.join();
  CHECK(s.code() == ErrorCode::kDropped);
  CHECK(s.message().find(path) != std::string::npos);
  CHECK_EQ(other->info().waiters, 0u);
  CHECK(!file_exists_for_test(path));
  // waiting on an already dropped table fails at once
  s = c.wait({{t, nullptr}}, std::chrono::seconds(30), &idx);
  CHECK(s.code() == ErrorCode::kDropped);
}

TEST(drop_with_owned_row_then_end_and_abort_just_leave_owner_mode) {
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(insert1(*t, "a").ok());
  REQUIRE(insert1(*t, "b").ok());
  Consumer c1, c2;
  int idx;
  REQUIRE(c1.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(c2.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(TableRegistry::instance().drop(path).ok());
  CHECK(c1.end().ok());
  CHECK(!c1.owner_mode());
  CHECK(c2.abort().ok());
  CHECK(!c2.owner_mode());
}

TEST(truncate_with_owned_row_and_waiter) {
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  RowId a;
  REQUIRE(insert1(*t, "a", &a).ok());
  REQUIRE(insert1(*t, "b").ok());
  Consumer owner, waiter;
  int idx;
  REQUIRE(owner.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(t->truncate().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->visible_count(nullptr), 0u);
  CHECK_EQ(scan(*t, &owner).size(), 0u);
  CHECK(owner.end().ok());  // the row vanished: end just leaves owner mode
  CHECK(!owner.owner_mode());
  // a waiter keeps waiting across TRUNCATE and gets the next row
  Status s;
  int widx = -1;
  std::thread th([&] { s = waiter.wait({{t, nullptr}}, std::chrono::seconds(10), &widx); });
  wait_for_waiters(*t, 1);
  REQUIRE(t->truncate().ok());
  RowId n;
  REQUIRE(insert1(*t, "new", &n).ok());
  th.join();
  CHECK(s.ok());
  CHECK_EQ(widx, 1);
  CHECK_EQ(waiter.owned_rowid(), n);
  CHECK(n > a);
  // durable: the truncated rows do not come back, ids stay monotonic
  waiter.release();
  t.reset();
  t = reopen(path, &s);
  REQUIRE(t);
  auto rows = scan(*t);
  REQUIRE(rows.size() == 1);
  CHECK_EQ(rows[0].first, n);
}

TEST(rename_keeps_waiters_and_owners) {
  TempDir dir;
  std::string from = dir.file("a"), to = dir.file("b");
  auto t = create_and_open(from);
  REQUIRE(t);
  REQUIRE(insert1(*t, "x").ok());
  Consumer owner, waiter;
  int idx;
  REQUIRE(owner.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  Status s;
  int widx = -1;
  std::thread th([&] { s = waiter.wait({{t, nullptr}}, std::chrono::seconds(10), &widx); });
  wait_for_waiters(*t, 1);
  REQUIRE(TableRegistry::instance().rename(from, to).ok());
  CHECK_EQ(t->path(), to);
  std::shared_ptr<QueueTable> same;
  REQUIRE(TableRegistry::instance().acquire(to, &same).ok());
  CHECK(same == t);
  REQUIRE(insert1(*t, "y").ok());
  th.join();
  CHECK(s.ok() && widx == 1);
  CHECK(owner.end().ok());
  CHECK(waiter.end().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK(!file_exists_for_test(from));
}

TEST(delete_claims) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  RowId a, b, c;
  REQUIRE(insert1(*t, "a", &a).ok());
  REQUIRE(insert1(*t, "b", &b).ok());
  REQUIRE(insert1(*t, "c", &c).ok());
  Consumer owner, deleter, other;
  int idx;
  REQUIRE(owner.wait({{t, nullptr}}, milliseconds(0), &idx).ok());  // owns a
  CHECK(!t->claim_for_delete(&deleter, a));  // never a row owned by another consumer
  CHECK(t->claim_for_delete(&deleter, b));
  CHECK(!t->claim_for_delete(&other, b));
  CHECK(t->claim_for_delete(&deleter, c));
  // claimed rows are invisible to others, visible to the claimer
  CHECK_EQ(scan(*t, &other).size(), 0u);
  CHECK_EQ(scan(*t, &deleter).size(), 2u);
  // a consumer going away returns its claims
  deleter.release();
  CHECK_EQ(scan(*t, &other).size(), 2u);
  CHECK(t->claim_for_delete(&deleter, b));
  REQUIRE(t->remove_claimed(&deleter).ok());
  auto left = scan(*t, &other);
  REQUIRE(left.size() == 1);
  CHECK_EQ(left[0].first, c);
  CHECK(!t->claim_for_delete(&deleter, b));  // gone
  // an owner may delete its own row; its end() then just leaves owner mode
  CHECK(t->claim_for_delete(&owner, a));
  REQUIRE(t->remove_claimed(&owner).ok());
  CHECK(owner.end().ok());
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
}

TEST(filtered_consumers_with_aborts_consume_every_row_exactly_once) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  const int kRows = 3000;
  for (int i = 0; i < kRows / 2; i++) REQUIRE(insert1(*t, (i % 2 ? "a:" : "b:") + std::to_string(i)).ok());
  auto fa = std::make_shared<PrefixFilter>("a:");
  auto fb = std::make_shared<PrefixFilter>("b:");
  std::atomic<int> consumed{0};
  std::mutex mu;
  std::map<std::string, int> seen;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // the other half arrives while consumers scan and wait
    for (int i = kRows / 2; i < kRows; i++) insert1(*t, (i % 2 ? "a:" : "b:") + std::to_string(i));
  });
  for (int k = 0; k < 4; k++)
    threads.emplace_back([&, k] {
      Consumer con;
      auto f = k % 2 ? fa : fb;
      int idx, n = 0;
      while (consumed.load() < kRows) {
        if (!con.wait({{t, f}}, milliseconds(20), &idx).ok() || idx == 0) continue;
        std::string p = owned_payload(*t, con);
        if (p.compare(0, 2, f->prefix) != 0) {
          std::lock_guard<std::mutex> g(mu);
          seen["wrong filter: " + p]++;
        }
        if (++n % 3 == 0) {  // hand every third row back
          con.abort();
          continue;
        }
        std::lock_guard<std::mutex> g(mu);
        seen[p]++;
        consumed++;
      }
      con.end();
    });
  for (auto& th : threads) th.join();
  CHECK_EQ(seen.size(), static_cast<size_t>(kRows));
  int dups = 0;
  for (auto& kv : seen) dups += kv.second != 1;
  CHECK_EQ(dups, 0);
  CHECK_EQ(t->info().rows, 0u);
}

TEST(filter_cursor_avoids_rescanning_a_deep_queue) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string> skip(1000, "skip");
  std::vector<std::string_view> rows(skip.begin(), skip.end());
  REQUIRE(t->insert(rows, nullptr).ok());
  auto f = std::make_shared<PrefixFilter>("want");
  Consumer c;
  int idx;
  REQUIRE(c.wait({{t, f}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 0);
  uint64_t e1 = f->evals.load();
  CHECK_EQ(e1, 1000u);
  REQUIRE(c.wait({{t, f}}, milliseconds(0), &idx).ok());
  CHECK_EQ(f->evals.load(), e1);  // nothing new: nothing evaluated
  REQUIRE(insert1(*t, "want").ok());
  REQUIRE(c.wait({{t, f}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(f->evals.load(), e1 + 1);
}

namespace {

// Counts the core's announced sleeps (installed as the blocking hooks for one test).
struct SleepCounter {
  static inline std::atomic<int> begins{0}, ends{0};
  static inline std::atomic<int> kinds[3] = {};
  static inline std::atomic<const void*> last_ended{nullptr};  // token of the last end()
  explicit SleepCounter() {
    begins = ends = 0;
    for (auto& k : kinds) k = 0;
    BlockingHooks h;
    h.begin = [](BlockingWait w) -> const void* {
      begins++, kinds[static_cast<int>(w)]++;
      return &kinds[static_cast<int>(w)];
    };
    h.end = [](const void* token) { ends++, last_ended = token; };
    set_blocking_hooks(h);
  }
  ~SleepCounter() { set_blocking_hooks(BlockingHooks()); }
  int of(BlockingWait w) const { return kinds[static_cast<int>(w)].load(); }
};

}  // namespace

// Each scope gets back the token its own begin() returned, also when scopes nest (the
// server restores the thread state it saved at that begin()).
TEST(nested_blocking_scopes_end_with_their_own_tokens) {
  SleepCounter sleeps;
  {
    BlockingScope outer(BlockingWait::kRow);
    {
      BlockingScope inner(BlockingWait::kCommit);
    }
    CHECK(sleeps.last_ended.load() == &SleepCounter::kinds[static_cast<int>(BlockingWait::kCommit)]);
  }
  CHECK(sleeps.last_ended.load() == &SleepCounter::kinds[static_cast<int>(BlockingWait::kRow)]);
  CHECK_EQ(sleeps.begins.load(), 2);
  CHECK_EQ(sleeps.ends.load(), 2);
}

// A wait announces a sleep only when it really sleeps, and each sleep ends once.
TEST(a_wait_announces_only_real_sleeps) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  SleepCounter sleeps;
  Consumer c;
  int idx = -1;
  REQUIRE(insert1(*t, "now").ok());
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(1000), &idx).ok());  // a row is there
  CHECK_EQ(idx, 1);
  CHECK_EQ(sleeps.begins.load(), 0);
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(30), &idx).ok());  // times out
  CHECK_EQ(idx, 0);
  CHECK_EQ(sleeps.of(BlockingWait::kRow), 1);
  CHECK_EQ(sleeps.ends.load(), 1);
  std::thread producer([&] {
    wait_for_waiters(*t);
    insert1(*t, "later");
  });
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(30000), &idx).ok());  // handed a row
  producer.join();
  CHECK_EQ(idx, 1);
  CHECK_EQ(sleeps.of(BlockingWait::kRow), 2);
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());  // timeout 0 never sleeps
  CHECK_EQ(idx, 0);
  CHECK_EQ(sleeps.of(BlockingWait::kRow), 2);
  CHECK_EQ(sleeps.of(BlockingWait::kSync), 0);  // sync mode none: no syncs to announce
  CHECK_EQ(sleeps.begins.load(), sleeps.ends.load());
}

// In a durable mode the leader announces its sync, and callers queued behind it their wait.
TEST(durable_commits_announce_syncs_and_queued_waits) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  SleepCounter sleeps;
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; w++)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; i++) insert1(*t, std::to_string(w) + ":" + std::to_string(i));
    });
  for (auto& th : writers) th.join();
  CHECK_EQ(t->visible_count(nullptr), 400u);
  CHECK(sleeps.of(BlockingWait::kSync) >= 1);
  CHECK(sleeps.of(BlockingWait::kSync) <= 400);
  CHECK(sleeps.of(BlockingWait::kCommit) >= 1);  // 8 writers: someone queued behind a sync
  CHECK_EQ(sleeps.begins.load(), sleeps.ends.load());
}

TEST(delivery_count_counts_every_handing_out_of_a_row) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  REQUIRE(insert1(*t, "poison").ok());
  Consumer a, b;
  int idx;
  CHECK_EQ(a.owned_delivery_count(), 0u);  // not in owner mode
  REQUIRE(a.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && idx == 1);
  CHECK_EQ(a.owned_delivery_count(), 1u);
  REQUIRE(a.abort().ok());
  CHECK_EQ(a.owned_delivery_count(), 0u);
  REQUIRE(b.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && idx == 1);
  CHECK_EQ(b.owned_delivery_count(), 2u);
  b.release();  // a disconnect
  REQUIRE(a.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && idx == 1);
  CHECK_EQ(a.owned_delivery_count(), 3u);

  // A new row, handed to a waiting consumer, starts at 1; ending the old one keeps counts apart.
  std::thread producer([&] {
    wait_for_waiters(*t, 1);
    insert1(*t, "fresh");
  });
  REQUIRE(a.wait({{t, nullptr}}, milliseconds(10000), &idx).ok() && idx == 1);
  producer.join();
  CHECK_EQ(owned_payload(*t, a), std::string("fresh"));
  CHECK_EQ(a.owned_delivery_count(), 1u);
  REQUIRE(a.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(a_sleeping_wait_ends_as_a_timeout_when_its_yield_check_says_so) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::atomic<int> checks{0};
  WaitYield yield{milliseconds(20), [&] { return ++checks >= 3; }};
  Consumer c;
  int index = -1;
  const auto started = std::chrono::steady_clock::now();
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(60000), &index, &yield).ok());
  CHECK_EQ(index, 0);
  CHECK_EQ(checks.load(), 3);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  CHECK(c.owner_mode());  // as a timeout: owner mode owning no row
  CHECK_EQ(c.owned_count(), 0u);
  // The waiter is gone: the next row is there for anyone.
  REQUIRE(insert1(*t, "row").ok());
  Consumer d;
  CHECK(take(d, t));
}

TEST(a_wait_whose_yield_check_says_no_still_gets_its_row) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::atomic<int> checks{0};
  WaitYield yield{milliseconds(10), [&] { return ++checks < 0; }};
  std::thread producer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    CHECK(insert1(*t, "row").ok());
  });
  Consumer c;
  size_t taken = 0;
  CHECK(c.wait_batch({t, nullptr}, 5, milliseconds(60000), &taken, &yield).ok());
  producer.join();
  CHECK_EQ(taken, 1u);
  CHECK(checks.load() >= 1);
}

// ---- A waiter takes from the first listed subscription that has a row when it takes ----

namespace {

// Holds a woken consumer between its wake-up and its take (the end of its announced sleep),
// until open(): what a producer does meanwhile happens "while the waiter is being woken".
struct WakeGate {
  static inline std::atomic<int> woken{0};
  static inline std::atomic<bool> is_open{false};
  static inline int row_token = 0;
  WakeGate() {
    woken = 0;
    is_open = false;
    BlockingHooks h;
    h.begin = [](BlockingWait w) -> const void* { return w == BlockingWait::kRow ? &row_token : nullptr; };
    h.end = [](const void* token) {
      if (token != &row_token) return;
      woken++;
      while (!is_open) std::this_thread::sleep_for(milliseconds(1));
    };
    set_blocking_hooks(h);
  }
  ~WakeGate() {
    open();
    set_blocking_hooks(BlockingHooks());
  }
  void wait_until_woken() const {
    while (woken.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  void open() { is_open = true; }
};

std::vector<RowId> insert_rows(QueueTable& t, std::vector<std::string> rows) {
  std::vector<std::string_view> views(rows.begin(), rows.end());
  std::vector<RowId> ids;
  CHECK(t.insert(views, &ids).ok());
  return ids;
}

}  // namespace

// Q4M's example: a consumer blocked on ('prio=0', 'prio=1') of one table, and one INSERT of
// (1,1),(2,0),(3,1): it gets row 2, as if the rows had been there before the wait. Row 1,
// handed to it first, goes back untouched (its delivery count as before, no lease left).
TEST(a_woken_waiter_takes_the_first_listed_subscription_of_one_insert) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  auto level1 = std::make_shared<PrefixFilter>("prio=0");
  auto level2 = std::make_shared<PrefixFilter>("prio=1");
  Consumer c;
  c.set_lease(milliseconds(600000));
  Status s;
  int idx = -1;
  const uint64_t swaps = global_stats().wait_handoffs_passed_over.get();
  std::thread th([&] { s = c.wait({{t, level1}, {t, level2}}, milliseconds(30000), &idx); });
  wait_for_waiters(*t, 2);  // one entry per subscription
  const std::vector<RowId> ids = insert_rows(*t, {"prio=1 a", "prio=0 b", "prio=1 c"});
  th.join();
  REQUIRE(s.ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(owned_payload(*t, c), std::string("prio=0 b"));
  CHECK_EQ(c.owned_delivery_count(), 1u);
  CHECK_EQ(global_stats().wait_handoffs_passed_over.get(), swaps + 1);
  auto owned = t->owned_rows();
  REQUIRE(owned.size() == 1u);
  CHECK_EQ(owned[0].id, ids[1]);
  CHECK(owned[0].lease_left_ms > 0);
  // The rows passed over are queued in order, never handed out.
  Consumer d;
  REQUIRE(d.wait({{t, level2}}, milliseconds(0), &idx).ok());
  CHECK_EQ(d.owned_rowid(), ids[0]);
  CHECK_EQ(d.owned_delivery_count(), 1u);
  REQUIRE(c.end().ok());
  REQUIRE(d.end().ok());
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->counters().lease_expiries.get(), 0u);
}

// The row a waiter passes over goes to the next waiter that wants it.
TEST(a_row_a_woken_waiter_passes_over_goes_to_the_next_waiter) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  auto level1 = std::make_shared<PrefixFilter>("0");
  auto level2 = std::make_shared<PrefixFilter>("1");
  Consumer c, d;
  Status sc, sd;
  int ic = -1, id = -1;
  std::thread tc([&] { sc = c.wait({{t, level1}, {t, level2}}, milliseconds(30000), &ic); });
  wait_for_waiters(*t, 2);
  std::thread td([&] { sd = d.wait({{t, level2}}, milliseconds(30000), &id); });
  wait_for_waiters(*t, 3);
  const std::vector<RowId> ids = insert_rows(*t, {"1", "0"});
  tc.join();
  td.join();
  REQUIRE(sc.ok() && sd.ok());
  CHECK_EQ(ic, 1);
  CHECK_EQ(c.owned_rowid(), ids[1]);
  CHECK_EQ(id, 1);
  CHECK_EQ(d.owned_rowid(), ids[0]);
  CHECK_EQ(d.owned_delivery_count(), 1u);
}

// Tables: a row of 'b' wakes a waiter on ('a', 'b'), and a row of 'a' comes while it is being
// woken: it ends up with the row of 'a'; the row of 'b' stays queued, never handed out.
TEST(a_row_of_an_earlier_table_that_comes_while_the_waiter_wakes_wins) {
  TempDir dir;
  auto a = create_and_open(dir.file("a"));
  auto b = create_and_open(dir.file("b"));
  REQUIRE(a && b);
  WakeGate gate;
  Consumer c;
  Status s;
  int idx = -1;
  std::thread th([&] { s = c.wait({{a, nullptr}, {b, nullptr}}, milliseconds(30000), &idx); });
  wait_for_waiters(*a, 1);
  wait_for_waiters(*b, 1);
  RowId in_b = 0, in_a = 0;
  REQUIRE(insert1(*b, "b", &in_b).ok());  // handed to c, which wakes...
  gate.wait_until_woken();
  REQUIRE(insert1(*a, "a", &in_a).ok());  // ...and this comes before it takes
  gate.open();
  th.join();
  REQUIRE(s.ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(c.owned_rowid(), in_a);
  CHECK_EQ(b->visible_count(nullptr), 1u);
  Consumer d;
  REQUIRE(d.wait({{b, nullptr}}, milliseconds(0), &idx).ok());
  CHECK_EQ(d.owned_rowid(), in_b);
  CHECK_EQ(d.owned_delivery_count(), 1u);
}

// A row given back was never handed out: the hand-out wait figure counts each row once,
// when it goes out for good (kept by the waiter it woke, or taken by the next one).
TEST(a_row_passed_over_is_counted_as_handed_out_once) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  auto level1 = std::make_shared<PrefixFilter>("0");
  auto level2 = std::make_shared<PrefixFilter>("1");
  Consumer c;
  Status s;
  int idx = -1;
  std::thread th([&] { s = c.wait({{t, level1}, {t, level2}}, milliseconds(30000), &idx); });
  wait_for_waiters(*t, 2);
  insert_rows(*t, {"1 a", "0 b"});  // "1 a" is handed to c first, then passed over
  th.join();
  REQUIRE(s.ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(t->counters().handout_wait.count(), 1u);  // "0 b" only
  Consumer d;
  REQUIRE(d.wait({{t, level2}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(t->counters().handout_wait.count(), 2u);
  // A provisional row that is kept counts once too.
  REQUIRE(d.end().ok());
  std::thread th2([&] { s = c.wait({{t, level1}, {t, level2}}, milliseconds(30000), &idx); });
  wait_for_waiters(*t, 2);
  insert_rows(*t, {"1 c"});
  th2.join();
  REQUIRE(s.ok());
  CHECK_EQ(idx, 2);
  CHECK_EQ(t->counters().handout_wait.count(), 3u);
}

// Nothing better listed before it: the handed row is kept.
TEST(a_woken_waiter_keeps_the_handed_row_when_no_earlier_subscription_has_one) {
  TempDir dir;
  auto a = create_and_open(dir.file("a"));
  auto b = create_and_open(dir.file("b"));
  REQUIRE(a && b);
  REQUIRE(insert1(*a, "not for it").ok());
  auto wanted = std::make_shared<PrefixFilter>("yes");
  Consumer c;
  Status s;
  int idx = -1;
  const uint64_t swaps = global_stats().wait_handoffs_passed_over.get();
  std::thread th([&] { s = c.wait({{a, wanted}, {b, nullptr}}, milliseconds(30000), &idx); });
  wait_for_waiters(*a, 1);
  wait_for_waiters(*b, 1);
  RowId in_b = 0;
  REQUIRE(insert1(*b, "b", &in_b).ok());
  th.join();
  REQUIRE(s.ok());
  CHECK_EQ(idx, 2);
  CHECK_EQ(c.owned_rowid(), in_b);
  CHECK_EQ(c.owned_delivery_count(), 1u);
  CHECK_EQ(global_stats().wait_handoffs_passed_over.get(), swaps);
}

// A row handed for a later subscription is leased once the waiter keeps it (a row it gives
// back never had a lease): the kept row's lease runs out as any other.
TEST(a_kept_row_of_a_later_subscription_is_leased_and_its_lease_runs_out) {
  TempDir dir;
  auto a = create_and_open(dir.file("a"));
  auto b = create_and_open(dir.file("b"));
  REQUIRE(a && b);
  WakeGate gate;
  Consumer c;
  c.set_lease(milliseconds(50));
  Status s;
  int idx = -1;
  std::thread th([&] { s = c.wait({{a, nullptr}, {b, nullptr}}, milliseconds(30000), &idx); });
  wait_for_waiters(*a, 1);
  wait_for_waiters(*b, 1);
  RowId in_b = 0;
  REQUIRE(insert1(*b, "b", &in_b).ok());
  gate.wait_until_woken();
  std::this_thread::sleep_for(milliseconds(200));  // past the lease, had it started at the hand-off
  CHECK_EQ(b->counters().lease_expiries.get(), 0u);
  gate.open();
  th.join();
  REQUIRE(s.ok());
  CHECK_EQ(idx, 2);
  CHECK_EQ(c.owned_rowid(), in_b);
  auto owned = b->owned_rows();
  REQUIRE(owned.size() == 1u);
  CHECK(owned[0].lease_left_ms >= 0);
  while (b->counters().lease_expiries.get() == 0) std::this_thread::sleep_for(milliseconds(1));
  CHECK(c.end().code() == ErrorCode::kLeaseExpired);
  CHECK_EQ(b->visible_count(nullptr), 1u);
}

// ---- After a wait that timed out: owner mode owning nothing (as Q4M) ----

TEST(a_timed_out_wait_leaves_the_consumer_in_owner_mode_owning_nothing) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  auto other = create_and_open(dir.file("other"));
  REQUIRE(t && other);
  RowId in_other = 0;
  REQUIRE(insert1(*other, "o", &in_other).ok());
  Consumer c;
  int idx = -1;
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 0);
  CHECK(c.owner_mode());
  CHECK(c.owned_table() == nullptr);
  CHECK_EQ(c.owned_rowid(), 0u);
  CHECK_EQ(c.owned_count(), 0u);
  CHECK_EQ(c.owned_delivery_count(), 0u);
  // Every table looks empty to it; others see the rows.
  RowId in_t = 0;
  REQUIRE(insert1(*t, "t", &in_t).ok());
  CHECK_EQ(scan(*t, &c).size(), 0u);
  CHECK_EQ(t->visible_count(&c), 0u);
  CHECK_EQ(scan(*other, &c).size(), 0u);
  CHECK_EQ(other->visible_count(&c), 0u);
  CHECK(!other->claim_for_delete(&c, in_other));
  CHECK_EQ(scan(*t, nullptr).size(), 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
  // end() leaves it (nothing to remove); then it is out of owner mode.
  const uint64_t ends = global_stats().ends.get();
  REQUIRE(c.end().ok());
  CHECK(!c.owner_mode());
  CHECK_EQ(global_stats().ends.get(), ends);  // nothing was ended
  CHECK_EQ(scan(*t, &c).size(), 1u);
  CHECK_EQ(other->visible_count(&c), 1u);
  CHECK(c.end().code() == ErrorCode::kNotOwner);
  CHECK(c.abort().code() == ErrorCode::kNotOwner);
  // abort() leaves it too, and a wait from it takes a row as usual.
  REQUIRE(c.wait({{other, std::make_shared<PrefixFilter>("x")}}, milliseconds(0), &idx).ok() && idx == 0);
  REQUIRE(c.abort().ok());
  CHECK(!c.owner_mode());
  REQUIRE(c.wait({{t, std::make_shared<PrefixFilter>("x")}}, milliseconds(0), &idx).ok() && idx == 0);
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  CHECK_EQ(idx, 1);
  CHECK_EQ(c.owned_rowid(), in_t);
  CHECK(c.renew_lease(milliseconds(1000)).ok());
  // release() (a disconnect) leaves it as well.
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && idx == 0);  // ends the row first
  CHECK_EQ(t->info().rows, 0u);
  CHECK(c.renew_lease(milliseconds(1000)).code() == ErrorCode::kNotOwner);  // owns no row
  c.release();
  CHECK(!c.owner_mode());
  CHECK_EQ(other->visible_count(&c), 1u);
}

// A backup's scan (mariadb-dump) sees the rows in flight: owned by a consumer, claimed by a
// transaction's end. Other scans do not; the rows stay where they are.
TEST(a_backup_scan_sees_the_rows_others_hold) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c"});
  REQUIRE(t);
  Consumer worker(1), ender(2), dump(3), other(4);
  REQUIRE(take(worker, t));  // owns a
  Transaction txn(2);
  ender.set_transaction(&txn);
  REQUIRE(take(ender, t));  // b, then held by the transaction
  REQUIRE(ender.end().ok());
  CHECK_EQ(scan(*t, &other).size(), 1u);
  dump.set_sees_held(true);
  const auto seen = scan(*t, &dump);
  REQUIRE(seen.size() == 3u);
  CHECK(seen[0].second == "a" && seen[1].second == "b" && seen[2].second == "c");
  CHECK_EQ(t->visible_count(&dump), 3u);
  dump.set_sees_held(false);
  CHECK_EQ(scan(*t, &dump).size(), 1u);
  txn.rollback();
  ender.set_transaction(nullptr);
  CHECK(worker.owner_mode());
}
