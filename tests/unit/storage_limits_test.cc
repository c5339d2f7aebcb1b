// The limits (issue 30): GROUP_CONCURRENCY and GROUP_RATE per message group
// (policy/message_groups.h, group_order.h), MAX_IN_FLIGHT and MAX_RATE for the table
// (policy/table_limits.h). A row over a limit waits; other keys go on; waiters are woken when a
// slot frees or a token comes (the table's timer), never by polling.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/policy/message_groups.h"
#include "check.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

std::shared_ptr<const KeyColumn> group_column() { return key_label_column("grp"); }
std::string row(const std::string& group, const std::string& label) { return key_label_row(group, label); }


// A table at `path` grouped by grp, with `configure` applied to its options, holding rows
// given as "group:label" ("" group = NULL).
std::shared_ptr<QueueTable> limited_table(const std::string& path, const std::function<void(TableOptions&)>& configure,
                                          std::initializer_list<const char*> rows) {
  auto t = create_and_open(path);
  if (!t) return nullptr;
  auto o = std::make_shared<TableOptions>(*t->options());
  o->message_group = group_column();
  configure(*o);
  t->configure(o);
  if (!insert_key_label_rows(*t, rows).ok()) return nullptr;
  return t;
}

}  // namespace

TEST(group_concurrency_n_lets_n_rows_of_a_group_out_in_order) {
  TempDir dir;
  auto t = limited_table(dir.file("t"), [](TableOptions& o) { o.group_concurrency = 2; },
                         {"A:a1", "A:a2", "A:a3", "B:b1", "A:a4"});
  REQUIRE(t);
  Consumer c1, c2, c3, c4;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  CHECK_EQ(take_key_label(c2, t), std::string("a2"));
  CHECK_EQ(take_key_label(c3, t), std::string("b1"));
  CHECK_EQ(take_key_label(c4, t), std::string(""));
  TableStats s = t->info();
  CHECK_EQ(s.groups_at_limit, 1u);
  CHECK_EQ(s.rows_held_back, 2u);
  REQUIRE(c2.end().ok());
  CHECK_EQ(take_key_label(c4, t), std::string("a3"));
  REQUIRE(c1.abort().ok());  // a1 back: it is first in line again
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  CHECK_EQ(take_key_label(c2, t), std::string(""));
}

TEST(concurrency_zero_means_no_limit_and_one_is_the_strict_fifo) {
  TempDir dir;
  auto t = limited_table(dir.file("t"), [](TableOptions& o) { o.group_concurrency = 0; }, {"A:a1", "A:a2", "A:a3"});
  REQUIRE(t);
  Consumer c1, c2, c3;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  CHECK_EQ(take_key_label(c2, t), std::string("a2"));
  CHECK_EQ(take_key_label(c3, t), std::string("a3"));
  set_option(*t, &TableOptions::group_concurrency, 1u);
  REQUIRE(c1.end().ok());
  REQUIRE(c2.end().ok());
  REQUIRE(insert1(*t, row("A", "a4")).ok());
  CHECK_EQ(take_key_label(c1, t), std::string(""));  // a3 is out
  REQUIRE(c3.end().ok());
  CHECK_EQ(take_key_label(c1, t), std::string("a4"));
}

TEST(a_raised_concurrency_wakes_a_waiter_and_a_lowered_one_holds_rows_back) {
  TempDir dir;
  auto t = limited_table(dir.file("t"), [](TableOptions&) {}, {"A:a1", "A:a2", "A:a3"});
  REQUIRE(t);
  Consumer c1, c2, c3;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  std::string got;
  std::thread w([&] { got = take_key_label(c2, t, milliseconds(10000)); });
  wait_for_waiters(*t, 1);
  set_option(*t, &TableOptions::group_concurrency, 3u);
  w.join();
  CHECK_EQ(got, std::string("a2"));
  set_option(*t, &TableOptions::group_concurrency, 2u);
  CHECK_EQ(take_key_label(c3, t), std::string(""));
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c3, t), std::string("a3"));
}

TEST(many_consumers_never_have_more_than_n_rows_of_a_group_out) {
  TempDir dir;
  constexpr uint32_t kLimit = 3;
  auto t = limited_table(dir.file("t"), [](TableOptions& o) { o.group_concurrency = kLimit; }, {});
  REQUIRE(t);
  constexpr int kGroups = 4, kPerGroup = 60, kConsumers = 12;
  for (int i = 0; i < kPerGroup; i++)
    for (int g = 0; g < kGroups; g++) REQUIRE(insert1(*t, row("G" + std::to_string(g), std::to_string(g))).ok());
  std::mutex m;
  std::map<std::string, uint32_t> out, peak;
  std::atomic<int> violations{0}, taken{0};
  std::vector<std::thread> ts;
  for (int n = 0; n < kConsumers; n++)
    ts.emplace_back([&, n] {
      Consumer c;
      std::mt19937 rng(n);
      for (;;) {
        const std::string g = take_key_label(c, t, milliseconds(300));
        if (g.empty()) return;
        {
          std::lock_guard<std::mutex> l(m);
          if (++out[g] > kLimit) violations++;
          peak[g] = std::max(peak[g], out[g]);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        {
          std::lock_guard<std::mutex> l(m);
          out[g]--;
        }
        if (rng() % 8 == 0) {
          if (!c.abort().ok()) violations++;
        } else {
          if (!c.end().ok()) violations++;
          taken++;
        }
      }
    });
  for (auto& th : ts) th.join();
  CHECK_EQ(violations.load(), 0);
  CHECK_EQ(taken.load(), kGroups * kPerGroup);
  CHECK_EQ(t->info().rows, 0u);
  uint32_t most = 0;
  for (auto& [g, p] : peak) most = std::max(most, p);
  CHECK(most > 1);
}

// Q4M's loop (issue 40, item 2): the end inside the next wait joins a transaction (binary log
// on, or BEGIN) that commits later, but the wait takes the next row at once: the row it ends
// holds no group place and no MAX_IN_FLIGHT slot any more. queue_end() in a transaction holds
// them until the commit.
TEST(the_end_inside_the_next_wait_frees_the_rows_slot_for_that_wait) {
  for (bool table_limit : {false, true}) {
    TempDir dir;
    auto t = limited_table(dir.file("t"), [&](TableOptions& o) {
      if (table_limit) o.max_in_flight = 1;  // (and no group limit: GROUP_CONCURRENCY 0)
      o.group_concurrency = table_limit ? 0 : 1;
    }, {"A:a1", "A:a2", "A:a3"});
    REQUIRE(t);
    Consumer c, other;
    Transaction txn(1);
    c.set_transaction(&txn);
    CHECK_EQ(take_key_label(c, t), std::string("a1"));
    CHECK_EQ(take_key_label(c, t), std::string("a2"));  // ends a1 (at the commit), takes a2
    CHECK_EQ(take_key_label(other, t), std::string(""));
    REQUIRE(c.end().ok());  // queue_end(): a2 holds its slot until the commit
    CHECK_EQ(take_key_label(other, t), std::string(""));
    CHECK_EQ(t->info().rows, 3u);
    REQUIRE(txn.commit().ok());
    c.set_transaction(nullptr);
    CHECK_EQ(take_key_label(other, t), std::string("a3"));
    CHECK_EQ(t->info().rows, 1u);
  }
}

TEST(max_in_flight_closes_the_table_and_a_row_ending_serves_a_waiter) {
  TempDir dir;
  auto t = limited_table(dir.file("t"), [](TableOptions& o) { o.max_in_flight = 2; }, {":n1", "A:a1", ":n2", "B:b1"});
  REQUIRE(t);
  Consumer c1, c2, c3;
  CHECK_EQ(take_key_label(c1, t), std::string("n1"));
  CHECK_EQ(take_key_label(c2, t), std::string("a1"));
  CHECK_EQ(take_key_label(c3, t), std::string(""));
  CHECK_EQ(t->info().in_flight, 2u);
  CHECK_EQ(t->info().rows_held_back, 2u);
  std::string got;
  std::thread w([&] { got = take_key_label(c3, t, milliseconds(10000)); });
  wait_for_waiters(*t, 1);
  REQUIRE(c1.end().ok());
  w.join();
  CHECK_EQ(got, std::string("n2"));
  REQUIRE(c2.abort().ok());  // an abort frees a slot too
  CHECK_EQ(take_key_label(c2, t), std::string("a1"));
  CHECK_EQ(take_key_label(c1, t), std::string(""));
  set_option(*t, &TableOptions::max_in_flight, uint64_t{0});  // no limit: b1 goes
  CHECK_EQ(take_key_label(c1, t), std::string("b1"));
}

TEST(a_batch_takes_no_more_than_the_limits_allow) {
  TempDir dir;
  auto t = limited_table(dir.file("t"), [](TableOptions& o) { o.group_concurrency = 2; },
                         {"A:1", "A:2", "A:3", "B:4", "B:5", "B:6", ":7"});
  REQUIRE(t);
  Consumer c;
  size_t n = 0;
  REQUIRE(c.wait_batch({t, nullptr}, 100, milliseconds(0), &n).ok());
  CHECK_EQ(n, 5u);  // 2 of A, 2 of B, the ungrouped one
  REQUIRE(c.end().ok());
  set_option(*t, &TableOptions::max_in_flight, uint64_t{1});
  REQUIRE(c.wait_batch({t, nullptr}, 100, milliseconds(0), &n).ok());
  CHECK_EQ(n, 1u);
}

TEST(a_group_out_of_tokens_waits_for_the_timer_and_others_go_on) {
  TempDir dir;
  auto t = limited_table(dir.file("t"),
                         [](TableOptions& o) {
                           o.group_concurrency = 0;
                           o.group_rate = 5;  // one token every 200 ms
                           o.group_burst = 1;
                         },
                         {"A:a1", "A:a2", "B:b1"});
  REQUIRE(t);
  Consumer c;
  CHECK_EQ(take_key_label(c, t), std::string("a1"));
  REQUIRE(c.end().ok());
  CHECK_EQ(take_key_label(c, t), std::string("b1"));  // a2 waits for A's next token
  REQUIRE(c.end().ok());
  CHECK_EQ(take_key_label(c, t), std::string(""));
  const auto before = std::chrono::steady_clock::now();
  CHECK_EQ(take_key_label(c, t, milliseconds(10000)), std::string("a2"));  // woken by the timer
  CHECK(std::chrono::steady_clock::now() - before >= milliseconds(150));
}

TEST(max_rate_hands_out_no_more_than_the_bucket_allows) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  auto o = std::make_shared<TableOptions>(*t->options());
  o->max_rate = 50;
  o->max_burst = 5;
  t->configure(o);
  for (int i = 0; i < 200; i++) REQUIRE(insert1(*t, "x").ok());
  const auto start = std::chrono::steady_clock::now();
  Consumer c;
  int n = 0;
  while (std::chrono::steady_clock::now() - start < milliseconds(500)) {
    if (!take(c, t, milliseconds(100))) continue;
    n++;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(n <= 5 + 50 * elapsed + 1e-9);
    REQUIRE(c.end().ok());
  }
  CHECK(n >= 5);
}

TEST(after_a_crash_no_row_is_out_and_the_window_holds) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = limited_table(path, [](TableOptions& o) { o.group_concurrency = 2; }, {"A:a1", "A:a2", "A:a3"});
  REQUIRE(t);
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  CHECK_EQ(take_key_label(c2, t), std::string("a2"));
  auto crashed = crash_copy(dir, path, "crashed");
  REQUIRE(crashed);
  auto o = std::make_shared<TableOptions>(*crashed->options());
  o->message_group = group_column();
  o->group_concurrency = 2;
  crashed->configure(o);
  Consumer d1, d2, d3;  // the owned rows came back, at the head of their group
  CHECK_EQ(take_key_label(d1, crashed), std::string("a1"));
  CHECK_EQ(take_key_label(d2, crashed), std::string("a2"));
  CHECK_EQ(take_key_label(d3, crashed), std::string(""));
}
