// MESSAGE_GROUP_COLUMN (TableOptions::message_group): rows of one group go out one at a
// time, in row-id order; other groups and ungrouped rows are not held up.
#include <cctype>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/policy/message_groups.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// Rows of (grp VARCHAR NULL, label VARCHAR NOT NULL), grouped by grp.
std::shared_ptr<const KeyColumn> group_column() { return key_label_column("grp"); }

// The payload of a row labelled `label`, in group `group` ("" = NULL: no group).
std::string row(const std::string& group, const std::string& label) { return key_label_row(group, label); }

std::string label_of(const std::string& payload) { return key_label_of(payload); }

// A grouped table at `path` holding rows given as "group:label" ("" group = NULL).
std::shared_ptr<QueueTable> grouped_table(const std::string& path, std::initializer_list<const char*> rows,
                                          std::map<std::string, RowId>* ids = nullptr) {
  auto t = create_and_open(path);
  if (!t) return nullptr;
  set_option(*t, &TableOptions::message_group, group_column());
  if (!insert_key_label_rows(*t, rows, ids).ok()) return nullptr;
  return t;
}

struct LabelFilter : RowFilter {
  explicit LabelFilter(std::string l) : label(std::move(l)) {}
  bool matches(std::string_view payload) const override { return label_of(std::string(payload)) == label; }
  std::string label;
};

}  // namespace

TEST(the_key_is_the_column_bytes_and_null_means_no_group) {
  std::string key;
  CHECK(row_key(*group_column(), row("cust-7", "x"), &key));
  CHECK_EQ(key, std::string("cust-7"));
  CHECK(!row_key(*group_column(), row("", "x"), &key));
  CHECK(!row_key(*group_column(), "\x00\x05" "ab", &key));  // does not decode
}

// The engine hands in the column's collation; here, one that ignores case.
TEST(values_the_collation_calls_equal_are_one_group) {
  auto column = std::make_shared<KeyColumn>(*group_column());
  column->collate = [](std::string_view v, std::string* key) {
    key->clear();
    for (char ch : v) key->push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  };
  std::string key;
  CHECK(row_key(*column, row("Cust-7", "x"), &key));
  CHECK_EQ(key, std::string("cust-7"));
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::message_group, column);
  REQUIRE(insert1(*t, row("alice", "a1")).ok());
  REQUIRE(insert1(*t, row("ALICE", "a2")).ok());
  CHECK_EQ(t->info().message_groups, 1u);
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  CHECK_EQ(take_key_label(c2, t), std::string(""));  // 'ALICE' is alice: it waits
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c2, t), std::string("a2"));
}

TEST(a_group_hands_out_one_row_at_a_time_in_order_and_other_rows_go_on) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2", "B:b1", "A:a3", ":n1", "B:b2", ":n2"});
  REQUIRE(t);
  CHECK_EQ(t->info().message_groups, 2u);
  Consumer c1, c2, c3, c4, c5;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  CHECK_EQ(take_key_label(c2, t), std::string("b1"));  // a2 waits for a1
  CHECK_EQ(take_key_label(c3, t), std::string("n1"));  // no group: not held up
  CHECK_EQ(take_key_label(c4, t), std::string("n2"));
  CHECK_EQ(take_key_label(c5, t), std::string(""));    // a2, b2 wait
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c5, t), std::string("a2"));
  REQUIRE(c2.abort().ok());                         // b1 failed: it goes again, before b2
  CHECK_EQ(take_key_label(c2, t), std::string("b1"));
  REQUIRE(c2.end().ok());
  CHECK_EQ(take_key_label(c2, t), std::string("b2"));
  REQUIRE(c5.end().ok());
  CHECK_EQ(take_key_label(c1, t), std::string("a3"));
  REQUIRE(c1.end().ok());
  REQUIRE(c2.end().ok());
  CHECK_EQ(t->info().message_groups, 0u);  // a group with no row left is forgotten
}

TEST(a_waiter_gets_the_next_row_of_a_group_once_the_row_ahead_ends) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2"});
  REQUIRE(t);
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, t), std::string("a1"));
  std::string got;
  std::thread waiter([&] { got = take_key_label(c2, t, milliseconds(10000)); });
  wait_for_waiters(*t);
  REQUIRE(c1.end().ok());
  waiter.join();
  CHECK_EQ(got, std::string("a2"));
  // A new row of a busy group waits too; of an idle group, it goes to the waiter at once.
  std::thread waiter2([&] { got = take_key_label(c1, t, milliseconds(10000)); });
  wait_for_waiters(*t);
  REQUIRE(insert1(*t, row("A", "a3")).ok());
  REQUIRE(insert1(*t, row("C", "c1")).ok());
  waiter2.join();
  CHECK_EQ(got, std::string("c1"));
}

TEST(a_retry_delay_holds_the_group_and_a_dead_row_lets_it_go_on) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2", "A:a3"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 2);
  Consumer c;
  CHECK_EQ(take_key_label(c, t), std::string("a1"));
  REQUIRE(c.abort(milliseconds(150)).ok());
  CHECK_EQ(take_key_label(c, t), std::string(""));  // a1 waits for its retry, and a2 for a1
  CHECK_EQ(take_key_label(c, t, milliseconds(5000)), std::string("a1"));
  REQUIRE(c.abort().ok());  // its second failure: dead
  CHECK_EQ(t->info().dead_rows, 1u);
  CHECK_EQ(take_key_label(c, t), std::string("a2"));
  // Taking the dead row out for a look holds nobody up.
  Consumer admin, other;
  bool taken = false;
  REQUIRE(admin.take_dead(t, &taken).ok());
  REQUIRE(taken);
  REQUIRE(c.end().ok());
  CHECK_EQ(take_key_label(other, t), std::string("a3"));
}

// A dead row that comes back (MAX_DELIVERIES raised) while a later row of its group is out
// waits for that row: a group never has two rows out.
TEST(a_row_back_from_the_dead_waits_for_the_row_of_its_group_that_is_out) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2", "A:a3"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 1);
  Consumer c, other;
  CHECK_EQ(take_key_label(c, t), std::string("a1"));
  REQUIRE(c.abort().ok());  // dead at its first failure
  CHECK_EQ(take_key_label(c, t), std::string("a2"));
  set_option(*t, &TableOptions::max_deliveries, 5);  // a1 is back in line, ahead of a2, which is out
  CHECK_EQ(t->info().dead_rows, 0u);
  CHECK_EQ(take_key_label(other, t), std::string(""));
  std::string got;
  std::thread waiter([&] { got = take_key_label(other, t, milliseconds(10000)); });
  wait_for_waiters(*t);
  REQUIRE(c.end().ok());  // a2 done: a1, first in line, goes next
  waiter.join();
  CHECK_EQ(got, std::string("a1"));
  CHECK_EQ(take_key_label(c, t), std::string(""));  // a3 waits for a1
  REQUIRE(other.end().ok());
  CHECK_EQ(take_key_label(c, t), std::string("a3"));
}

// A row out past a limit that was lowered under it is lent out like a dead row: it holds
// its group up no more.
TEST(lowering_the_limit_under_an_owned_row_lets_its_group_go_on) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 3);
  Consumer c, other;
  CHECK_EQ(take_key_label(c, t), std::string("a1"));
  REQUIRE(c.abort().ok());
  CHECK_EQ(take_key_label(c, t), std::string("a1"));  // its second delivery
  CHECK_EQ(take_key_label(other, t), std::string(""));
  set_option(*t, &TableOptions::max_deliveries, 1);
  CHECK_EQ(take_key_label(other, t), std::string("a2"));
  REQUIRE(c.abort().ok());  // a1 comes back past the limit: dead
  CHECK_EQ(t->info().dead_rows, 1u);
}

TEST(a_delete_of_the_row_ahead_lets_the_group_go_on) {
  TempDir dir;
  std::map<std::string, RowId> ids;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2"}, &ids);
  REQUIRE(t);
  Consumer deleter, c;
  REQUIRE(t->claim_for_delete(&deleter, ids["a1"]));
  CHECK_EQ(take_key_label(c, t), std::string(""));  // a1 is being deleted: the group waits
  REQUIRE(t->remove_claimed(&deleter).ok());
  CHECK_EQ(take_key_label(c, t), std::string("a2"));
}

TEST(a_filtered_wait_keeps_the_group_order) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2", "B:b1"});
  REQUIRE(t);
  auto wants_a2 = std::make_shared<LabelFilter>("a2");
  Consumer c, other;
  CHECK_EQ(take_key_label(c, t, milliseconds(0), wants_a2), std::string(""));  // a1 is first
  CHECK_EQ(take_key_label(other, t), std::string("a1"));
  CHECK_EQ(take_key_label(c, t, milliseconds(0), wants_a2), std::string(""));  // a1 is out
  std::string got;
  std::thread waiter([&] { got = take_key_label(c, t, milliseconds(10000), wants_a2); });
  wait_for_waiters(*t);
  REQUIRE(other.end().ok());
  waiter.join();
  CHECK_EQ(got, std::string("a2"));
}

TEST(groups_and_their_order_hold_across_a_crash_and_a_reopen) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = grouped_table(path, {"A:a1", "A:a2", "B:b1", "B:b2"});
  REQUIRE(t);
  Consumer c;
  CHECK_EQ(take_key_label(c, t), std::string("a1"));
  REQUIRE(c.end().ok());
  CHECK_EQ(take_key_label(c, t), std::string("a2"));  // owned when the server dies: it comes back

  auto crashed = crash_copy(dir, path, "crashed");
  REQUIRE(crashed);
  set_option(*crashed, &TableOptions::message_group, group_column());  // what the engine does when a statement opens it
  CHECK_EQ(crashed->info().message_groups, 2u);
  Consumer c1, c2, c3;
  CHECK_EQ(take_key_label(c1, crashed), std::string("a2"));
  CHECK_EQ(take_key_label(c2, crashed), std::string("b1"));
  CHECK_EQ(take_key_label(c3, crashed), std::string(""));
  REQUIRE(crashed->compact().ok());  // ids, and so groups, are unchanged by a compaction
  REQUIRE(c2.end().ok());
  CHECK_EQ(take_key_label(c3, crashed), std::string("b2"));

  REQUIRE(c.abort().ok());
  t.reset();
  auto reopened = reopen(path);  // clean close: index snapshot
  REQUIRE(reopened);
  set_option(*reopened, &TableOptions::message_group, group_column());
  Consumer d1, d2, d3;
  CHECK_EQ(take_key_label(d1, reopened), std::string("a2"));
  CHECK_EQ(take_key_label(d2, reopened), std::string("b1"));
  CHECK_EQ(take_key_label(d3, reopened), std::string(""));
}

TEST(truncate_forgets_the_groups) {
  TempDir dir;
  auto t = grouped_table(dir.file("t"), {"A:a1", "A:a2"});
  REQUIRE(t);
  Consumer c;
  CHECK_EQ(take_key_label(c, t), std::string("a1"));
  REQUIRE(t->truncate().ok());
  CHECK_EQ(t->info().message_groups, 0u);
  REQUIRE(insert1(*t, row("A", "a3")).ok());
  Consumer c2;
  CHECK_EQ(take_key_label(c2, t), std::string("a3"));  // a1 is gone with the rest
}

// Consumers ending and failing rows at random: never two rows of a group out at once, and
// each group's rows end in insert order.
TEST(concurrent_consumers_never_have_two_rows_of_a_group_out) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::message_group, group_column());
  constexpr int kGroups = 8, kPerGroup = 150;
  for (int i = 0; i < kPerGroup; i++)
    for (int g = 0; g < kGroups; g++)
      REQUIRE(insert1(*t, row("g" + std::to_string(g), std::to_string(g) + "/" + std::to_string(i))).ok());
  std::mutex mu;
  std::set<int> out;            // groups with a row out
  std::map<int, int> next_end;  // each group's next row to end
  std::atomic<int> violations{0}, ended{0};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a stuck group fails, not hangs
  auto worker = [&](unsigned seed) {
    std::mt19937 rng(seed);
    Consumer c;
    for (;;) {
      const std::string label = take_key_label(c, t, milliseconds(200));
      if (label.empty()) {
        if (ended.load() == kGroups * kPerGroup) return;
        if (std::chrono::steady_clock::now() > give_up) {
          violations++;
          return;
        }
        continue;
      }
      const int g = std::stoi(label), i = std::stoi(label.substr(label.find('/') + 1));
      {
        std::lock_guard<std::mutex> l(mu);
        if (!out.insert(g).second) violations++;
        if (next_end[g] != i) violations++;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      const bool fail = rng() % 8 == 0;
      {
        std::lock_guard<std::mutex> l(mu);  // before the row goes: the group's next may go at once
        out.erase(g);
        if (!fail) next_end[g]++;
      }
      if (fail ? !c.abort().ok() : !c.end().ok()) violations++;
      if (!fail) ended++;
    }
  };
  std::vector<std::thread> threads;
  for (unsigned s = 1; s <= 6; s++) threads.emplace_back(worker, s);
  for (auto& th : threads) th.join();
  CHECK_EQ(violations.load(), 0);
  CHECK_EQ(t->info().rows, 0u);
  for (int g = 0; g < kGroups; g++) CHECK_EQ(next_end[g], kPerGroup);
}
