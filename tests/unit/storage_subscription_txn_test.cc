// A subscription's ends inside a transaction (core/table/subscriptions.cc, "Ends in a
// transaction"): held by the transaction until it ends, given back to that subscription by a
// rollback, written as the table's prepared part (TXN_SUB_REMOVE, TXN_REMOVE) and kept by
// recovery and compaction until the part ends; the rows the end leaves decided by every
// subscription are removed by the same commit; the log hears of them in the transaction.
#include <mutex>
#include <string>
#include <vector>

#include "check.h"
#include "core/table/subscription_log.h"
#include "core/table/subscriptions.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

struct TestLog : SubscriptionLog {
  std::mutex mu;
  std::vector<std::string> entries;  // "<how> <name> <ended> / <removed>"
  static std::string ids(const std::vector<RowId>& v) {
    std::string s;
    for (RowId id : v) s += (s.empty() ? "" : ",") + std::to_string(id);
    return s;
  }
  Status subscribed(const QueueTable&, std::string_view, std::string_view, RowId) override { return Status::Ok(); }
  Status unsubscribed(const QueueTable&, std::string_view) override { return Status::Ok(); }
  Status ended(const QueueTable&, std::string_view name, const std::vector<RowId>& e,
               const std::vector<RowId>& r) override {
    std::lock_guard<std::mutex> l(mu);
    entries.push_back("now " + std::string(name) + " " + ids(e) + "/" + ids(r));
    return Status::Ok();
  }
  Status ended_in_transaction(const QueueTable&, std::string_view name, const std::vector<RowId>& e,
                              const std::vector<RowId>& r) override {
    std::lock_guard<std::mutex> l(mu);
    entries.push_back("txn " + std::string(name) + " " + ids(e) + "/" + ids(r));
    return Status::Ok();
  }
};

struct LogScope {
  TestLog log;
  LogScope() { SubscriptionLog::set(&log); }
  ~LogScope() { SubscriptionLog::set(nullptr); }
};

// Takes one row of `sub` with `c`; its id (0: none).
RowId take_one(Consumer& c, const std::shared_ptr<QueueTable>& sub) {
  int idx = -1;
  if (!c.wait({{sub, nullptr}}, milliseconds(0), &idx).ok() || idx < 0) return 0;
  return c.owned_rowid();
}

// Takes one row of `sub` and ends it inside `txn`; its id (0: none).
RowId end_in(Transaction& txn, const std::shared_ptr<QueueTable>& sub) {
  Consumer c;
  const RowId id = take_one(c, sub);
  if (!id) return 0;
  c.set_transaction(&txn);
  Status s = c.end();
  c.set_transaction(nullptr);
  return s.ok() ? id : 0;
}

uint64_t pending(QueueTable& t, const std::string& name) {
  for (const SubscriptionInfo& i : t.subscriptions()->list())
    if (i.name == name) return i.pending_rows;
  return ~uint64_t(0);
}

std::shared_ptr<QueueTable> table_with_two_subscriptions(const std::string& path) {
  auto t = create_and_open(path);
  if (!t) return nullptr;
  if (!t->subscriptions()->create("a", "", false).ok()) return nullptr;
  if (!t->subscriptions()->create("b", "", false).ok()) return nullptr;
  for (const char* r : {"1", "2"})
    if (!insert1(*t, r).ok()) return nullptr;
  return t;
}

}  // namespace

TEST(a_rollback_gives_the_row_back_to_that_subscription_only) {
  LogScope scope;
  TempDir dir;
  auto t = table_with_two_subscriptions(dir.file("t"));
  REQUIRE(t);
  auto a = t->subscriptions()->find("a");
  Transaction txn(1);
  CHECK_EQ(end_in(txn, a), RowId(1));
  CHECK(scope.log.entries == std::vector<std::string>{"txn a 1/"});
  CHECK_EQ(pending(*t, "a"), 2u);  // not ended yet
  Consumer other;
  CHECK_EQ(take_one(other, a), RowId(2));  // row 1 is held by the transaction
  REQUIRE(other.abort().ok());
  txn.rollback();
  Consumer c;
  CHECK_EQ(take_one(c, a), RowId(1));  // back for a
  CHECK_EQ(c.owned_delivery_count(), 2u);
  REQUIRE(c.abort().ok());
  CHECK_EQ(pending(*t, "b"), 2u);
  CHECK_EQ(scan(*t).size(), 2u);
}

TEST(a_one_phase_commit_ends_the_row_and_the_last_end_removes_it) {
  LogScope scope;
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with_two_subscriptions(path);
  REQUIRE(t);
  auto a = t->subscriptions()->find("a"), b = t->subscriptions()->find("b");
  {
    Consumer c;  // b ends row 1 at once
    CHECK_EQ(take_one(c, b), RowId(1));
    REQUIRE(c.end().ok());
  }
  Transaction txn(1);
  CHECK_EQ(end_in(txn, a), RowId(1));
  CHECK_EQ(end_in(txn, a), RowId(2));
  REQUIRE(txn.commit().ok());
  CHECK(scope.log.entries == (std::vector<std::string>{"now b 1/", "txn a 1/1", "txn a 2/"}));
  CHECK_EQ(pending(*t, "a"), 0u);
  CHECK_EQ(pending(*t, "b"), 1u);
  CHECK(scan(*t).size() == 1u && scan(*t)[0].first == 2);  // row 1 went with the commit
  t = reopen(path);
  REQUIRE(t);
  CHECK_EQ(pending(*t, "a"), 0u);
  CHECK_EQ(pending(*t, "b"), 1u);
}

TEST(a_prepared_part_holds_the_rows_across_a_crash_and_a_compaction_until_it_ends) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with_two_subscriptions(path);
  REQUIRE(t);
  {
    Consumer c;  // b ends row 1: a's end in the part is its last
    CHECK_EQ(take_one(c, t->subscriptions()->find("b")), RowId(1));
    REQUIRE(c.end().ok());
  }
  Transaction txn(1);
  CHECK_EQ(end_in(txn, t->subscriptions()->find("a")), RowId(1));
  REQUIRE(txn.prepare("xid-1").ok());
  txn.detach();  // an XA transaction whose connection went
  // A crash: the file as it is (no clean close).
  t = crash_copy(dir, path, "crashed");
  REQUIRE(t);
  auto parts = t->prepared_parts();
  REQUIRE(parts.size() == 1u);
  CHECK(parts[0].xid == "xid-1");
  auto a = t->subscriptions()->find("a");
  REQUIRE(a);
  {
    Consumer c;
    CHECK_EQ(take_one(c, a), RowId(2));  // row 1 is the part's
    REQUIRE(c.abort().ok());
  }
  CHECK_EQ(pending(*t, "a"), 2u);
  REQUIRE(t->compact().ok());
  t = reopen(dir.file("crashed"));
  REQUIRE(t);
  parts = t->prepared_parts();
  REQUIRE(parts.size() == 1u);
  a = t->subscriptions()->find("a");
  {
    Consumer c;
    CHECK_EQ(take_one(c, a), RowId(2));  // still the part's after the compaction
    REQUIRE(c.abort().ok());
  }
  REQUIRE(t->end_part(parts[0].id, true).ok());
  CHECK_EQ(pending(*t, "a"), 1u);
  CHECK(scan(*t).size() == 1u && scan(*t)[0].first == 2);  // row 1: ended by both, removed
  t = reopen(dir.file("crashed"));
  REQUIRE(t);
  CHECK(t->prepared_parts().empty());
  CHECK_EQ(pending(*t, "a"), 1u);
  CHECK_EQ(pending(*t, "b"), 1u);
  CHECK(scan(*t).size() == 1u);
}

TEST(a_prepared_part_rolled_back_after_a_crash_gives_the_row_back) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with_two_subscriptions(path);
  REQUIRE(t);
  Transaction txn(1);
  CHECK_EQ(end_in(txn, t->subscriptions()->find("a")), RowId(1));
  REQUIRE(txn.prepare("xid-1").ok());
  txn.detach();
  t = crash_copy(dir, path, "crashed");
  REQUIRE(t);
  auto parts = t->prepared_parts();
  REQUIRE(parts.size() == 1u);
  REQUIRE(t->end_part(parts[0].id, false).ok());
  Consumer c;
  CHECK_EQ(take_one(c, t->subscriptions()->find("a")), RowId(1));
  REQUIRE(c.end().ok());
  CHECK_EQ(pending(*t, "a"), 1u);
  CHECK_EQ(pending(*t, "b"), 2u);
}

