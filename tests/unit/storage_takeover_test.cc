// QueueTable::take_over: the end of a copying ALTER TABLE. The new table keeps every row's id,
// takes the state each row has in the old table now (consumed, owned, returned), keeps the
// owners' rows theirs (end, abort, lease, message group follow them), carries the next id and
// the relay records, and gives everything back if it is dropped while the old table stands.
#include <thread>

#include "check.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// The old table `src` (rows a, b, c, d) and an empty new table, as an ALTER has them.
struct Alter {
  TempDir dir;
  std::shared_ptr<QueueTable> src = table_with(dir.file("src"), {"a", "b", "c", "d"});
  std::string dst_path = dir.file("dst");
  std::shared_ptr<QueueTable> dst = create_and_open(dst_path);
};

std::string payload_of(QueueTable& t, const Consumer& c) {
  auto rows = scan(t, &c);
  return rows.empty() ? "" : rows[0].second;
}

}  // namespace

TEST(owned_rows_stay_owned_under_their_ids) {
  Alter x;
  REQUIRE(x.src && x.dst);
  Consumer owner, other;
  REQUIRE(take(owner, x.src));  // a
  REQUIRE(copy_rows(*x.src, *x.dst).ok());
  REQUIRE(x.dst->take_over(x.src, true).ok());
  CHECK_EQ(x.dst->info().owned_rows, 1u);
  CHECK_EQ(x.dst->info().next_rowid, 5u);
  CHECK(!take(other, x.src));  // the old table hands out nothing more
  REQUIRE(take(other, x.dst));
  CHECK_EQ(other.owned_rowid(), 2u);  // b: a is still owner's
  CHECK_EQ(owner.owned_rowid(), 1u);
  CHECK_EQ(payload_of(*x.dst, owner), "a");  // its scan of the new table finds its row
  CHECK_EQ(payload_of(*x.src, owner), "a");  // and so does one of the old table still open
  REQUIRE(owner.end().ok());
  CHECK_EQ(x.dst->info().rows, 3u);
  CHECK_EQ(x.dst->info().owned_rows, 1u);
  auto crashed = crash_copy(x.dir, x.dst_path, "crashed");  // the end is in the new table's file
  REQUIRE(crashed);
  CHECK_EQ(crashed->info().rows, 3u);
}

TEST(rows_consumed_or_returned_during_the_copy_are_so_in_the_new_table) {
  Alter x;
  REQUIRE(x.src && x.dst);
  Consumer early, late, returned;
  REQUIRE(take(early, x.src));  // a, owned when the copy reads it
  REQUIRE(take(returned, x.src));  // b
  REQUIRE(copy_rows(*x.src, *x.dst).ok());
  REQUIRE(early.end().ok());  // consumed after the copy read it
  REQUIRE(returned.abort().ok());  // back, with one delivery behind it
  REQUIRE(take(late, x.src));  // b again: taken after the copy read it free
  REQUIRE(x.dst->take_over(x.src, true).ok());
  TableStats info = x.dst->info();
  CHECK_EQ(info.rows, 3u);  // a is gone
  CHECK_EQ(info.owned_rows, 1u);  // b is late's
  CHECK_EQ(late.owned_rowid(), 2u);
  CHECK_EQ(late.owned_delivery_count(), 2u);
  auto crashed = crash_copy(x.dir, x.dst_path, "crashed");
  REQUIRE(crashed);
  CHECK_EQ(crashed->info().rows, 3u);
  REQUIRE(late.abort().ok());
  Consumer next;
  REQUIRE(take(next, x.dst));
  CHECK_EQ(next.owned_rowid(), 2u);
  CHECK_EQ(next.owned_delivery_count(), 3u);
}

TEST(a_batch_and_its_lease_move_with_it) {
  Alter x;
  REQUIRE(x.src && x.dst);
  Consumer owner;
  owner.set_lease(milliseconds(3600 * 1000));
  size_t taken = 0;
  REQUIRE(owner.wait_batch({x.src, nullptr}, 2, milliseconds(0), &taken).ok());
  REQUIRE(taken == 2u);
  REQUIRE(copy_rows(*x.src, *x.dst).ok());
  REQUIRE(x.dst->take_over(x.src, true).ok());
  auto owned = x.dst->owned_rows();
  REQUIRE(owned.size() == 2u);
  CHECK(owned[0].lease_left_ms > 3000 * 1000);
  // A short lease now: it runs out in the new table, and both rows come back there.
  REQUIRE(owner.renew_lease(milliseconds(50)).ok());
  for (int i = 0; i < 500 && x.dst->info().owned_rows > 0; i++) std::this_thread::sleep_for(milliseconds(10));
  CHECK_EQ(x.dst->info().owned_rows, 0u);
  CHECK(owner.end().code() == ErrorCode::kLeaseExpired);
  CHECK(!owner.owner_mode());
  CHECK_EQ(x.dst->info().rows, 4u);
}

TEST(an_owned_row_keeps_its_message_group_held) {
  TempDir dir;
  auto src = create_and_open(dir.file("src"));
  auto dst = create_and_open(dir.file("dst"));
  REQUIRE(src && dst);
  set_option(*src, &TableOptions::message_group, key_label_column("g"));
  set_option(*dst, &TableOptions::message_group, key_label_column("g"));
  std::vector<std::string> rows{key_label_row("alice", "1"), key_label_row("alice", "2"), key_label_row("bob", "3")};
  std::vector<std::string_view> views(rows.begin(), rows.end());
  REQUIRE(src->insert(views, nullptr).ok());
  Consumer owner, other;
  REQUIRE(take(owner, src));  // alice's first
  REQUIRE(copy_rows(*src, *dst).ok());
  REQUIRE(dst->take_over(src, true).ok());
  REQUIRE(take(other, dst));
  CHECK_EQ(other.owned_rowid(), 3u);  // bob's: alice's second waits for the first
  Consumer third;
  CHECK(!take(third, dst));
  REQUIRE(owner.end().ok());
  REQUIRE(take(third, dst));
  CHECK_EQ(third.owned_rowid(), 2u);
}

TEST(a_disconnect_returns_the_row_to_the_new_table) {
  Alter x;
  REQUIRE(x.src && x.dst);
  {
    Consumer owner;
    REQUIRE(take(owner, x.src));
    REQUIRE(copy_rows(*x.src, *x.dst).ok());
    REQUIRE(x.dst->take_over(x.src, true).ok());
  }  // release()
  CHECK_EQ(x.dst->info().owned_rows, 0u);
  Consumer next;
  REQUIRE(take(next, x.dst));
  CHECK_EQ(next.owned_rowid(), 1u);
  CHECK_EQ(next.owned_delivery_count(), 2u);
}

TEST(the_next_id_and_the_relay_records_are_kept_durably) {
  Alter x;
  REQUIRE(x.src && x.dst);
  bool accepted = false;
  REQUIRE(relay1(*x.src, "relayed", 7, 40, false, &accepted).ok() && accepted);  // row 5
  for (int i = 0; i < 5; i++) {  // every row consumed: the copy is empty
    Consumer c;
    REQUIRE(take(c, x.src));
    REQUIRE(c.end().ok());
  }
  REQUIRE(copy_rows(*x.src, *x.dst).ok());
  REQUIRE(x.dst->take_over(x.src, true).ok());
  CHECK_EQ(x.dst->last_relayed_rowid(7), 40u);
  RowId id = 0;
  REQUIRE(insert1(*x.dst, "new", &id).ok());
  CHECK_EQ(id, 6u);  // never an id the old table gave out
  auto crashed = crash_copy(x.dir, x.dst_path, "crashed");
  REQUIRE(crashed);
  CHECK_EQ(crashed->last_relayed_rowid(7), 40u);
  CHECK_EQ(crashed->info().next_rowid, 7u);
}

// queue_end() with the binary log on (or inside BEGIN) is a transaction's claim: it must claim,
// and commit, the rows in the table that took them over. It claimed them in the old table,
// where they were gone once the ALTER dropped it: end() succeeded, nothing was removed, the
// row stayed owned (issue 40, item 1).
TEST(a_transactions_end_after_the_take_over_removes_the_rows_in_the_new_table) {
  for (bool batch : {false, true}) {
    Alter x;
    REQUIRE(x.src && x.dst);
    Consumer owner, other;
    if (batch) {
      size_t taken = 0;
      REQUIRE(owner.wait_batch(Subscription{x.src, nullptr}, 2, milliseconds(0), &taken).ok());
      REQUIRE(taken == 2);  // a, b
    } else {
      REQUIRE(take(owner, x.src));  // a
    }
    REQUIRE(copy_rows(*x.src, *x.dst).ok());
    REQUIRE(x.dst->take_over(x.src, true).ok());
    REQUIRE(TableRegistry::instance().drop(x.dir.file("src")).ok());  // the ALTER went through
    Transaction txn(1);
    owner.set_transaction(&txn);
    REQUIRE(owner.end().ok());
    owner.set_transaction(nullptr);
    CHECK_EQ(x.dst->info().owned_rows, batch ? 2u : 1u);  // claimed, removed at the commit
    REQUIRE(txn.commit().ok());
    CHECK_EQ(x.dst->info().rows, batch ? 2u : 3u);
    CHECK_EQ(x.dst->info().owned_rows, 0u);
    REQUIRE(take(other, x.dst));
    CHECK_EQ(other.owned_rowid(), batch ? 3u : 2u);
    auto crashed = crash_copy(x.dir, x.dst_path, "crashed");  // durable in the new table's file
    REQUIRE(crashed);
    CHECK_EQ(crashed->info().rows, batch ? 2u : 3u);
  }
}

TEST(a_dropped_new_table_gives_everything_back) {
  Alter x;
  REQUIRE(x.src && x.dst);
  Consumer ender, keeper, other;
  REQUIRE(take(ender, x.src));   // a
  REQUIRE(take(keeper, x.src));  // b
  REQUIRE(copy_rows(*x.src, *x.dst).ok());
  REQUIRE(x.dst->take_over(x.src, true).ok());
  REQUIRE(ender.end().ok());  // in the new table
  // The ALTER fails after all: the server drops the new table, the old one stays.
  REQUIRE(TableRegistry::instance().drop(x.dst_path, true).ok());
  TableStats info = x.src->info();
  CHECK_EQ(info.rows, 3u);  // a's end holds
  CHECK_EQ(info.owned_rows, 1u);  // b is still keeper's
  REQUIRE(take(other, x.src));
  CHECK_EQ(other.owned_rowid(), 3u);
  CHECK_EQ(payload_of(*x.src, keeper), "b");
  REQUIRE(keeper.end().ok());
  CHECK_EQ(x.src->info().rows, 2u);
  auto crashed = crash_copy(x.dir, x.dir.file("src"), "crashed");
  REQUIRE(crashed);
  CHECK_EQ(crashed->info().rows, 2u);
}

TEST(new_ids_are_refused_while_rows_are_owned_or_were_consumed) {
  Alter x;
  REQUIRE(x.src && x.dst);
  Consumer owner;
  REQUIRE(take(owner, x.src));
  REQUIRE(copy_rows(*x.src, *x.dst).ok());
  Status s = x.dst->take_over(x.src, false);
  CHECK(s.code() == ErrorCode::kInvalid);
  CHECK(s.message().find("1 row is owned") != std::string::npos);
  REQUIRE(owner.end().ok());
  s = x.dst->take_over(x.src, false);
  CHECK(s.code() == ErrorCode::kInvalid);  // 4 copied, 3 left
  Consumer still;
  CHECK(take(still, x.src));  // the old table is untouched
}

TEST(a_table_that_leaves_the_engine_tells_its_owners) {
  Alter x;
  REQUIRE(x.src);
  Consumer owner;
  REQUIRE(take(owner, x.src));
  REQUIRE(TableRegistry::instance().drop(x.dir.file("src"), true).ok());  // ALTER ... ENGINE=InnoDB
  CHECK_EQ(owner.delivery_count_of(1), 0u);  // queue_rowid(): NULL
  Status s = owner.end();
  CHECK(s.code() == ErrorCode::kRowsMoved);
  CHECK(s.message().find("not removed") != std::string::npos);
  CHECK(!owner.owner_mode());
  // A plain DROP TABLE is no move: the row is gone with the table.
  auto t = table_with(x.dir.file("t"), {"a"});
  REQUIRE(t);
  REQUIRE(take(owner, t));
  REQUIRE(TableRegistry::instance().drop(x.dir.file("t")).ok());
  CHECK(owner.end().ok());
}

TEST(copied_ids_must_increase) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  RowHistory h5, h3;
  h5.id = 5;
  h3.id = 3;
  std::vector<std::string_view> rows{"a", "b"};
  CHECK(t->insert_with_history(rows, {h5, h3}).code() == ErrorCode::kInvalid);
  CHECK_EQ(t->info().rows, 0u);
  REQUIRE(t->insert_with_history(rows, {h3, h5}).ok());
  CHECK_EQ(t->info().next_rowid, 6u);
  CHECK_EQ(scan(*t)[1].first, 5u);
}
