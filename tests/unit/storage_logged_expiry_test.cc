// MESSAGE_TTL on a server whose changes replicate (ExpiryLog, core/policy/expiry.h): rows
// past their TTL are claimed (no consumer gets them) and left to a logged transaction
// (Transaction::remove_expired), which names them to the replication log; a replica
// (ExpiryLog::expires false) claims nothing and keeps its rows until its primary's log
// removes them, and expires by itself again once promoted.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "core/policy/expiry.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

struct TestExpiryLog : ExpiryLog {
  std::atomic<bool> primary{true};
  std::atomic<int> calls{0};
  bool expires() const override { return primary.load(); }
  bool logged() const override { return true; }
  void claimed(const std::string&) override { calls++; }
};

// Installed for one test: every table of the process sees it.
struct LogScope {
  TestExpiryLog log;
  LogScope() { ExpiryLog::set(&log); }
  ~LogScope() { ExpiryLog::set(nullptr); }
};

}  // namespace

TEST(expired_rows_wait_claimed_for_the_logged_transaction_that_names_them) {
  LogScope scope;
  TempDir dir;
  auto t = table_with(dir.file("t"), {"old1", "old2"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(1200));
  RowId young = 0;
  REQUIRE(insert1(*t, "young", &young).ok());
  set_option(*t, &TableOptions::message_ttl, milliseconds(1000));
  // Claimed, not removed: the log was told, and no consumer gets them.
  CHECK(scope.log.calls.load() > 0);
  CHECK_EQ(t->info().rows, 3u);
  CHECK_EQ(t->counters().rows_expired.get(), 0u);
  {
    Consumer c;
    REQUIRE(take(c, t));
    CHECK_EQ(c.owned_rowid(), young);
    CHECK(c.abort().ok());
  }
  // A rolled-back removal gives them back, where the expiry claims them again.
  RecordedRemovals named;
  {
    Transaction txn(7);
    txn.set_replication_log(&named);
    size_t n = 0;
    REQUIRE(txn.remove_expired(t, 100, &n).ok());
    CHECK_EQ(n, 2u);
    const int before = scope.log.calls.load();
    txn.rollback();
    REQUIRE(eventually([&] { return scope.log.calls.load() > before; }));
  }
  named.rows.clear();
  Transaction txn(7);
  txn.set_replication_log(&named);
  size_t n = 0;
  REQUIRE(txn.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 2u);
  REQUIRE(named.rows.size() == 2u);
  CHECK(named.rows[0].id < young && named.rows[1].id < young);
  CHECK_EQ(named.rows[0].length, 4u);
  REQUIRE(txn.commit().ok());
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->counters().rows_expired.get(), 2u);
  // Nothing more to remove: a second transaction names none.
  Transaction again(7);
  again.set_replication_log(&named);
  REQUIRE(again.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 0u);
  CHECK_EQ(named.rows.size(), 2u);
}

TEST(a_replica_keeps_its_rows_past_the_ttl_until_it_is_promoted) {
  LogScope scope;
  scope.log.primary = false;
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b"});
  REQUIRE(t);
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));
  std::this_thread::sleep_for(milliseconds(400));  // several reaper passes past the TTL
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(scope.log.calls.load(), 0);
  {
    Consumer c;  // a row given back past its TTL stays queued too
    REQUIRE(take(c, t));
    CHECK(c.abort().ok());
  }
  Transaction txn(7);
  size_t n = 0;
  REQUIRE(txn.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 0u);
  txn.rollback();
  // Promoted: the timer, which kept looking, claims them within a second or so.
  scope.log.primary = true;
  REQUIRE(eventually([&] { return scope.log.calls.load() > 0; }));
  Transaction removal(7);
  REQUIRE(removal.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 2u);
  REQUIRE(removal.commit().ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(a_removal_takes_at_most_its_max_oldest_first_and_leaves_the_rest_claimed) {
  LogScope scope;
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b", "c"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(300));
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));  // claims all three at once
  CHECK(scope.log.calls.load() > 0);
  RecordedRemovals named;
  Transaction first(7);
  first.set_replication_log(&named);
  size_t n = 0;
  REQUIRE(first.remove_expired(t, 2, &n).ok());
  CHECK_EQ(n, 2u);
  REQUIRE(first.commit().ok());
  REQUIRE(named.rows.size() == 2u);
  CHECK(named.rows[0].id < named.rows[1].id);
  CHECK_EQ(t->info().rows, 1u);
  Consumer c;
  CHECK(!take(c, t));  // the third is still claimed
  Transaction second(7);
  second.set_replication_log(&named);
  REQUIRE(second.remove_expired(t, 2, &n).ok());
  CHECK_EQ(n, 1u);
  REQUIRE(second.commit().ok());
  REQUIRE(named.rows.size() == 3u);
  CHECK(named.rows[1].id < named.rows[2].id);
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->counters().rows_expired.get(), 3u);
}

// A replica whose applier just started still expires for up to a second (it looks at its
// appliers once a second), so its timer may have claimed rows for its own expiry when the
// primary's removal of them arrives: the primary's removal takes them (the replica's expiry
// then finds them gone). Before, the removal failed ("held by a connection here") and the
// replica's applier stopped (test_replication.py, a replica applying 3.5 s late).
TEST(a_logged_removal_takes_rows_claimed_for_this_servers_expiry) {
  LogScope scope;
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b"});
  REQUIRE(t);
  std::this_thread::sleep_for(milliseconds(300));
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));  // claims both for the expiry
  REQUIRE(eventually([&] { return scope.log.calls.load() > 0; }));
  RecordedRemovals named;
  {
    Transaction peek(7);  // their names as the primary logs them
    peek.set_replication_log(&named);
    size_t n = 0;
    REQUIRE(peek.remove_expired(t, 100, &n).ok());
    REQUIRE(n == 2u);
    peek.rollback();  // back to the expiry's claim
  }
  REQUIRE(eventually([&] { return scope.log.calls.load() > 1; }));
  Transaction applied(8);
  Status s = applied.remove_named(t, named.rows);
  CHECK(s.ok());
  if (!s.ok()) fprintf(stderr, "  %s\n", s.message().c_str());
  REQUIRE(applied.commit().ok());
  CHECK_EQ(t->info().rows, 0u);
  Transaction expiry(7);  // the replica's own expiry: nothing left to remove
  size_t n = 0;
  REQUIRE(expiry.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 0u);
}

// MESSAGE_GROUP_COLUMN: a row claimed for expiry is never handed out again, so it holds no
// place in its group from the claim on, not only once the logged transaction removes it.
// That transaction is the engine's own connection's, later (a thread, a statement, the
// binary log's sync): before, the key's next rows waited for it, and a young one could
// expire meanwhile, never handed out (test_limits.py's test_an_expired_row_frees_its_keys_place
// on a busy machine). Nor does the row take its place back while the transaction holds it,
// once that transaction prepares (its part takes the claim over), or when it rolls back (the
// expiry claims it again).
TEST(a_row_claimed_for_a_logged_expiry_frees_its_groups_place_at_once) {
  LogScope scope;  // logged: nothing removes the claimed rows until a transaction here does
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::message_group, key_label_column("grp"));
  REQUIRE(insert_key_label_rows(*t, {"A:old"}).ok());
  std::this_thread::sleep_for(milliseconds(1200));
  REQUIRE(insert_key_label_rows(*t, {"A:a2", "A:a3", "A:a4"}).ok());
  set_option(*t, &TableOptions::message_ttl, milliseconds(1000));  // claims "old" at once
  REQUIRE(eventually([&] { return scope.log.calls.load() > 0; }));
  CHECK_EQ(t->info().rows, 4u);
  Consumer c1, c2, c3;
  CHECK_EQ(take_key_label(c1, t), std::string("a2"));  // before: "" (old held the group)
  CHECK_EQ(take_key_label(c2, t), std::string(""));    // GROUP_CONCURRENCY 1: a2 is out
  // The logged transaction takes the claim over, and its prepared part: still out of line.
  Transaction txn(7);
  size_t n = 0;
  REQUIRE(txn.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 1u);
  REQUIRE(txn.prepare("xid-expiry").ok());
  REQUIRE(c1.end().ok());
  CHECK_EQ(take_key_label(c2, t), std::string("a3"));
  // Rolled back: the expiry claims it again, still out of line.
  const int before = scope.log.calls.load();
  txn.rollback();
  REQUIRE(eventually([&] { return scope.log.calls.load() > before; }));
  REQUIRE(c2.end().ok());
  CHECK_EQ(take_key_label(c3, t), std::string("a4"));
  Transaction removal(7);
  REQUIRE(removal.remove_expired(t, 100, &n).ok());
  CHECK_EQ(n, 1u);
  REQUIRE(removal.commit().ok());
  REQUIRE(c3.end().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->counters().rows_expired.get(), 1u);
}
