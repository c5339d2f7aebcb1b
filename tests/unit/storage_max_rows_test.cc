// MAX_ROWS (TableOptions::max_rows): an insert that would take the table past its row
// limit fails with kFull and adds none of its rows; concurrent producers never overshoot.
#include <atomic>
#include <map>
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

Status insert_rows(QueueTable& t, std::initializer_list<std::string_view> rows) {
  std::vector<std::string_view> v(rows);
  return t.insert(v, nullptr);
}

}  // namespace

TEST(an_insert_past_the_limit_fails_whole_and_consuming_makes_room) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_rows, 3);
  Status s = insert_rows(*t, {"c", "d"});  // 2 + 2 > 3: neither goes in
  CHECK(s.code() == ErrorCode::kFull);
  CHECK(s.message().find("holds 2 rows") != std::string::npos);
  CHECK(s.message().find("limit is 3") != std::string::npos);
  CHECK(s.message().find("2 rows do not fit") != std::string::npos);
  CHECK_EQ(t->info().rows, 2u);
  REQUIRE(insert1(*t, "c").ok());  // exactly at the limit
  CHECK(insert1(*t, "d").code() == ErrorCode::kFull);
  CHECK_EQ(scan(*t).size(), 3u);

  Consumer c;
  REQUIRE(take(c, t));
  CHECK(insert1(*t, "d").code() == ErrorCode::kFull);  // an owned row still counts
  REQUIRE(c.end().ok());
  REQUIRE(insert1(*t, "d").ok());  // consumed: room for one
  CHECK_EQ(t->info().rows, 3u);

  set_option(*t, &TableOptions::max_rows, 0);  // no limit
  REQUIRE(insert_rows(*t, {"e", "f", "g"}).ok());
  CHECK_EQ(t->info().rows, 6u);
}

TEST(a_lowered_limit_keeps_the_rows_and_refuses_inserts_until_below_it) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c", "d"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_rows, 2);
  CHECK_EQ(t->info().rows, 4u);  // nothing is dropped
  CHECK(insert1(*t, "e").code() == ErrorCode::kFull);
  for (int i = 0; i < 2; i++) {
    Consumer c;
    REQUIRE(take(c, t));
    REQUIRE(c.end().ok());
  }
  CHECK(insert1(*t, "e").code() == ErrorCode::kFull);  // 2 rows: at the limit
  Consumer c;
  REQUIRE(take(c, t));
  REQUIRE(c.end().ok());
  REQUIRE(insert1(*t, "e").ok());
}

TEST(relayed_replays_take_no_room) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::max_rows, 2);
  size_t dropped = 0;
  const std::vector<std::string_view> two{"r1", "r2"};
  const RowId ids[] = {1, 2, 3};
  REQUIRE(t->insert_relayed(two, 7, ids, false, &dropped).ok());
  CHECK_EQ(t->info().rows, 2u);
  // The same two rows again: dropped as replays, so a full table accepts the statement.
  REQUIRE(t->insert_relayed(two, 7, ids, false, &dropped).ok());
  CHECK_EQ(dropped, 2u);
  // One replay and one new row: the new one does not fit, and the source's record stays.
  const std::vector<std::string_view> mixed{"r2", "r3"};
  Status s = t->insert_relayed(mixed, 7, ids + 1, false, &dropped);
  CHECK(s.code() == ErrorCode::kFull);
  CHECK(s.message().find("1 row does not fit") != std::string::npos);
  CHECK_EQ(t->last_relayed_rowid(7), 2u);
  Consumer c;
  REQUIRE(take(c, t));
  REQUIRE(c.end().ok());
  REQUIRE(t->insert_relayed(mixed, 7, ids + 1, false, &dropped).ok());  // retried once there is room
  CHECK_EQ(dropped, 1u);
  CHECK_EQ(t->last_relayed_rowid(7), 3u);
  CHECK_EQ(t->info().rows, 2u);
}

TEST(concurrent_producers_never_take_the_table_past_its_limit) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  constexpr uint64_t kLimit = 500;
  set_option(*t, &TableOptions::max_rows, kLimit);
  std::atomic<uint64_t> accepted{0}, refused{0}, other{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; p++) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < 200; i++) {
        const std::string a = "p" + std::to_string(p) + "-" + std::to_string(i);
        const std::string b = a + "b";
        const std::vector<std::string_view> rows{a, b};  // two rows: both or neither
        Status s = t->insert(rows, nullptr);
        if (s.ok()) accepted += 2;
        else if (s.code() == ErrorCode::kFull) refused += 2;
        else other++;
      }
    });
  }
  // A consumer drains meanwhile, so some inserts find room again.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> consumed{0};
  std::thread consumer([&] {
    Consumer c;
    while (!stop.load() && consumed.load() < 300) {
      if (take(c, t) && c.end().ok()) consumed++;
    }
  });
  for (auto& th : producers) th.join();
  stop = true;
  consumer.join();
  CHECK_EQ(other.load(), 0u);
  CHECK_EQ(accepted.load() + refused.load(), 8u * 200u * 2u);
  CHECK(refused.load() > 0);
  CHECK_EQ(t->info().rows, accepted.load() - consumed.load());
  CHECK(t->info().rows <= kLimit);
  // Every accepted pair is whole: both rows of a pair are in the table, or consumed.
  std::map<std::string, int> halves;
  for (auto& [id, row] : scan(*t)) halves[row.back() == 'b' ? row.substr(0, row.size() - 1) : row]++;
  uint64_t unpaired = 0;
  for (auto& [key, n] : halves) unpaired += n == 1;
  CHECK(unpaired <= consumed.load());
}

