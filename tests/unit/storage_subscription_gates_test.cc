// A subscription's takes keep the table's group order and limits for themselves
// (core/table/subscription_gates.h): MESSAGE_GROUP_COLUMN FIFO and GROUP_CONCURRENCY,
// GROUP_RATE, MAX_IN_FLIGHT and MAX_RATE per subscription, VISIBLE_AT_COLUMN for every one.
#include <future>
#include <map>
#include <string>
#include <thread>

#include "check.h"
#include "core/row/visible_at.h"
#include "core/table/subscriptions.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// A table grouped by key_label_row's key, with subscriptions "a" and "b" from its next row on.
struct Fixture {
  TempDir dir;
  std::string path = dir.file("t");
  std::shared_ptr<QueueTable> t;
  std::shared_ptr<QueueTable> a, b;
  explicit Fixture(bool grouped = true) {
    t = create_and_open(path);
    if (!t) return;
    if (grouped) set_option(*t, &TableOptions::message_group, key_label_column("grp"));
    subscribe();
  }
  void subscribe() {
    Subscriptions* subs = t->subscriptions();
    if (!subs->find("a")) (void)subs->create("a", "", false);
    if (!subs->find("b")) (void)subs->create("b", "", false);
    a = subs->find("a");
    b = subs->find("b");
  }
  bool ok() const { return t && a && b; }
};

}  // namespace

TEST(a_groups_rows_go_to_a_subscription_one_at_a_time_in_order) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2", "B:b1", "A:a3", ":n1"}).ok());
  Consumer c1, c2, c3, c4;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  CHECK_EQ(take_key_label(c2, f.a), std::string("b1"));  // a2 waits for a1
  CHECK_EQ(take_key_label(c3, f.a), std::string("n1"));  // no group: not held up
  CHECK_EQ(take_key_label(c4, f.a), std::string(""));
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c4, f.a), std::string("a2"));
  CHECK_EQ(take_key_label(c1, f.a), std::string(""));  // a3 waits for a2
  REQUIRE(c4.end().ok());
  CHECK_EQ(take_key_label(c1, f.a), std::string("a3"));
}

TEST(one_subscription_holding_a_group_does_not_hold_it_for_another) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}).ok());
  Consumer billing, email1, email2;
  CHECK_EQ(take_key_label(billing, f.a), std::string("a1"));  // billing holds group A...
  CHECK_EQ(take_key_label(email1, f.b), std::string("a1"));    // ...email gets it all the same
  REQUIRE(email1.end().ok());
  CHECK_EQ(take_key_label(email2, f.b), std::string("a2"));
  REQUIRE(email2.end().ok());
  CHECK_EQ(take_key_label(email1, f.a), std::string(""));  // billing's a2 still waits for its a1
  REQUIRE(billing.end().ok());
  CHECK_EQ(take_key_label(email1, f.a), std::string("a2"));
}

TEST(a_row_back_from_an_abort_or_a_retry_delay_keeps_its_place_in_its_group) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}).ok());
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  REQUIRE(c1.abort().ok());
  CHECK_EQ(take_key_label(c2, f.a), std::string("a1"));  // again, ahead of a2
  REQUIRE(c2.abort(milliseconds(100000)).ok());          // a retry far away: a2 still waits
  CHECK_EQ(take_key_label(c1, f.a), std::string(""));
  CHECK_EQ(take_key_label(c1, f.b), std::string("a1"));  // b's own line
}

TEST(a_waiting_consumer_gets_the_groups_next_row_when_the_row_ahead_ends) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}).ok());
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  auto got = std::async(std::launch::async, [&] { return take_key_label(c2, f.a, milliseconds(10000)); });
  wait_for_waiters(*f.a);
  REQUIRE(c1.end().ok());
  CHECK_EQ(got.get(), std::string("a2"));
}

TEST(a_batch_of_a_subscription_takes_one_row_per_group) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2", "B:b1", "B:b2"}).ok());
  Consumer c;
  size_t got = 0;
  REQUIRE(c.wait_batch({f.a, nullptr}, 10, milliseconds(0), &got).ok());
  CHECK_EQ(got, size_t(2));
}

TEST(group_concurrency_counts_per_subscription) {
  Fixture f;
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::group_concurrency, uint32_t(2));
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2", "A:a3"}).ok());
  Consumer c1, c2, c3, d1;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  CHECK_EQ(take_key_label(c2, f.a), std::string("a2"));
  CHECK_EQ(take_key_label(c3, f.a), std::string(""));  // two of A out for a
  CHECK_EQ(take_key_label(d1, f.b), std::string("a1"));
  REQUIRE(c2.end().ok());
  CHECK_EQ(take_key_label(c3, f.a), std::string("a3"));
}

TEST(group_rate_is_a_bucket_per_group_and_subscription) {
  Fixture f;
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::group_rate, 1.0 / 3600);  // one an hour: the second never comes here
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2", "B:b1"}).ok());
  Consumer c1, c2, d1;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c2, f.a), std::string("b1"));  // A spent its token; B has its own
  CHECK_EQ(take_key_label(c1, f.a), std::string(""));
  CHECK_EQ(take_key_label(d1, f.b), std::string("a1"));  // b's bucket for A is full
}

TEST(max_in_flight_is_a_budget_of_each_subscription) {
  Fixture f(false);
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::max_in_flight, uint64_t(1));
  REQUIRE(insert_key_label_rows(*f.t, {":r1", ":r2"}).ok());
  Consumer c1, c2, d1;
  CHECK_EQ(take_key_label(c1, f.a), std::string("r1"));
  CHECK_EQ(take_key_label(c2, f.a), std::string(""));    // a's one row is out
  CHECK_EQ(take_key_label(d1, f.b), std::string("r1"));  // b has its own
  auto got = std::async(std::launch::async, [&] { return take_key_label(c2, f.a, milliseconds(10000)); });
  wait_for_waiters(*f.a);
  REQUIRE(c1.end().ok());  // a's slot frees: its waiter takes r2
  CHECK_EQ(got.get(), std::string("r2"));
  REQUIRE(c2.abort(milliseconds(100000)).ok());  // back with a delay: no longer in flight
  Consumer c3;
  CHECK_EQ(take_key_label(c3, f.a), std::string(""));  // (nothing else free for a)
  CHECK_EQ(f.a->info().owned_rows, 0u);
}

TEST(max_rate_is_a_bucket_of_each_subscription) {
  Fixture f(false);
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::max_rate, 1.0 / 3600);
  REQUIRE(insert_key_label_rows(*f.t, {":r1", ":r2"}).ok());
  Consumer c1, c2, d1, d2;
  CHECK_EQ(take_key_label(c1, f.a), std::string("r1"));
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c2, f.a), std::string(""));  // a's token is spent
  CHECK_EQ(take_key_label(d1, f.b), std::string("r1"));
  CHECK_EQ(take_key_label(d2, f.b), std::string(""));
}

TEST(a_row_not_visible_yet_goes_to_no_subscription_before_its_time) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  // Rows of (v INT, at TIMESTAMP(3) NULL).
  auto c = std::make_shared<VisibleAtColumn>();
  c->schema.table_name = "test.jobs";
  c->schema.null_bytes = 1;
  c->schema.columns = {ColumnInfo{"v", ColumnKind::kInt, 4, false, 0, 0, 0},
                       ColumnInfo{"at", ColumnKind::kTimestamp, 6, false, 3, 0, 2}};
  c->column = 1;
  set_option(*t, &TableOptions::visible_at, std::shared_ptr<const VisibleAtColumn>(c));
  REQUIRE(t->subscriptions()->create("a", "", false).ok());
  auto a = t->subscriptions()->find("a");
  auto row = [](int32_t v, int64_t at_ms) {
    std::string out;
    RowPayloadWriter w(&out);
    w.begin(std::string(1, '\x00'));
    w.add(std::string{static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                      static_cast<char>(v >> 24)});
    const uint32_t s = static_cast<uint32_t>(at_ms / 1000), frac = static_cast<uint32_t>(at_ms % 1000 * 10);
    w.add(std::string{static_cast<char>(s >> 24), static_cast<char>(s >> 16), static_cast<char>(s >> 8),
                      static_cast<char>(s), static_cast<char>(frac >> 8), static_cast<char>(frac)});
    return out;
  };
  const int64_t now = wall_ms();
  RowId later = 0, past = 0;
  REQUIRE(insert1(*t, row(1, now + 400), &later).ok());
  REQUIRE(insert1(*t, row(2, now - 1000), &past).ok());
  Consumer c1, c2;
  REQUIRE(take(c1, a));
  CHECK_EQ(c1.owned_rowid(), past);
  CHECK(!take(c2, a));
  REQUIRE(take(c2, a, milliseconds(10000)));  // handed out once due, to the waiter
  CHECK(wall_ms() >= now + 400);
  CHECK_EQ(c2.owned_rowid(), later);
}

TEST(after_a_reopen_ended_rows_stay_ended_and_owned_ones_lead_their_group_again) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2", "A:a3"}).ok());
  {
    Consumer c1, c2;
    CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
    REQUIRE(c1.end().ok());
    CHECK_EQ(take_key_label(c2, f.a), std::string("a2"));  // owned at the close
    f.a.reset();
    f.b.reset();
    f.t.reset();
  }
  f.t = reopen(f.path);
  REQUIRE(f.t);
  set_option(*f.t, &TableOptions::message_group, key_label_column("grp"));
  f.subscribe();
  REQUIRE(f.ok());
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a2"));  // back, ahead of a3; a1 stays ended
  CHECK_EQ(take_key_label(c2, f.a), std::string(""));
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c2, f.a), std::string("a3"));
  CHECK_EQ(take_key_label(c1, f.b), std::string("a1"));  // b ended nothing
}

TEST(a_dead_row_holds_up_nothing_in_its_subscription) {
  Fixture f;
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::max_deliveries, uint32_t(1));
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}).ok());
  Consumer c1, c2, c3;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  REQUIRE(c1.abort().ok());  // its last delivery: dead for a
  CHECK_EQ(take_key_label(c2, f.a), std::string("a2"));
  bool taken = false;
  REQUIRE(c3.take_dead(f.a, &taken).ok());  // lent out: still holds up nothing
  CHECK(taken);
  CHECK_EQ(f.a->info().dead_rows + f.a->info().owned_rows, 2u);
}

TEST(a_deleted_row_out_no_longer_holds_its_group_in_a_subscription) {
  Fixture f;
  REQUIRE(f.ok());
  std::map<std::string, RowId> ids;
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}, &ids).ok());
  Consumer c1, c2, deleter;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  CHECK_EQ(take_key_label(c2, f.a), std::string(""));
  REQUIRE(f.t->claim_for_delete(&deleter, ids["a1"]));  // a DELETE removes it for every subscription
  REQUIRE(f.t->remove_claimed(&deleter).ok());
  CHECK_EQ(take_key_label(c2, f.a), std::string("a2"));
}

TEST(a_consumer_waiting_for_a_token_gets_the_row_when_it_comes) {
  Fixture f;
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::group_rate, 20.0);  // a token every 50 ms per group
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}).ok());
  Consumer c1, c2;
  CHECK_EQ(take_key_label(c1, f.a), std::string("a1"));
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c2, f.a, milliseconds(10000)), std::string("a2"));  // the timer's pass wakes it
}

TEST(release_owned_gives_a_subscriptions_row_back_ahead_of_its_group) {
  Fixture f;
  REQUIRE(f.ok());
  REQUIRE(insert_key_label_rows(*f.t, {"A:a1", "A:a2"}).ok());
  Consumer hung, other, d1;
  CHECK_EQ(take_key_label(hung, f.a), std::string("a1"));
  CHECK_EQ(take_key_label(d1, f.b), std::string("a1"));
  CHECK_EQ(f.a->owned_rows().size(), size_t(1));
  size_t released = 0;
  REQUIRE(f.a->release_owned(hung.owned_rowid(), 99, &released).ok());
  CHECK_EQ(released, size_t(1));
  CHECK_EQ(f.a->owned_rows().size(), size_t(0));
  CHECK_EQ(take_key_label(other, f.a), std::string("a1"));  // again, ahead of a2
  CHECK_EQ(other.owned_delivery_count(), 2u);
  CHECK(hung.end().code() == ErrorCode::kLeaseExpired);  // told, nothing ended
  CHECK_EQ(f.b->owned_rows().size(), size_t(1));         // b's delivery untouched
  REQUIRE(other.end().ok());
  CHECK_EQ(take_key_label(other, f.a), std::string("a2"));
}

TEST(a_subscriptions_dead_rows_are_redriven_in_place_or_purged_for_it_alone) {
  Fixture f(false);
  REQUIRE(f.ok());
  set_option(*f.t, &TableOptions::max_deliveries, uint32_t(1));
  REQUIRE(insert_key_label_rows(*f.t, {":r1", ":r2"}).ok());
  Consumer c;
  for (const char* label : {"r1", "r2"}) {
    CHECK_EQ(take_key_label(c, f.a), std::string(label));
    REQUIRE(c.abort().ok());  // dead for a
  }
  CHECK_EQ(f.a->info().dead_rows, 2u);
  size_t n = 0;
  REQUIRE(f.a->redrive_dead(1, &n).ok());
  CHECK_EQ(n, size_t(1));
  CHECK_EQ(take_key_label(c, f.a), std::string("r1"));
  CHECK_EQ(c.owned_delivery_count(), 1u);
  REQUIRE(c.end().ok());
  REQUIRE(f.a->purge_dead(100, &n).ok());
  CHECK_EQ(n, size_t(1));
  CHECK_EQ(f.a->info().dead_rows, 0u);
  CHECK_EQ(scan(*f.t).size(), size_t(2));  // b still needs both
  CHECK_EQ(take_key_label(c, f.b), std::string("r1"));
  REQUIRE(c.end().ok());
  CHECK_EQ(take_key_label(c, f.b), std::string("r2"));
  REQUIRE(c.end().ok());
  CHECK_EQ(scan(*f.t).size(), size_t(0));  // every subscription decided both
}
