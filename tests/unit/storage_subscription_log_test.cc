// Subscriptions and the SubscriptionLog (core/table/subscription_log.h): what a primary tells
// the log, and a replica applying it (apply_subscribe / apply_unsubscribe / apply_ends):
// the same subscriptions and rows, each apply a no-op the second time.
#include <mutex>
#include <string>
#include <vector>

#include "check.h"
#include "core/table/subscription_log.h"
#include "core/table/subscriptions.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

struct Entry {
  std::string what, name, condition;
  RowId start = 0;
  std::vector<RowId> ended, removed;
};

struct TestLog : SubscriptionLog {
  std::mutex mu;
  std::vector<Entry> entries;
  Status subscribed(const QueueTable&, std::string_view name, std::string_view condition, RowId start) override {
    std::lock_guard<std::mutex> l(mu);
    entries.push_back({"subscribed", std::string(name), std::string(condition), start, {}, {}});
    return Status::Ok();
  }
  Status unsubscribed(const QueueTable&, std::string_view name) override {
    std::lock_guard<std::mutex> l(mu);
    entries.push_back({"unsubscribed", std::string(name), "", 0, {}, {}});
    return Status::Ok();
  }
  Status ended(const QueueTable&, std::string_view name, const std::vector<RowId>& ended,
               const std::vector<RowId>& removed) override {
    std::lock_guard<std::mutex> l(mu);
    entries.push_back({"ended", std::string(name), "", 0, ended, removed});
    return Status::Ok();
  }
};

struct LogScope {
  TestLog log;
  LogScope() { SubscriptionLog::set(&log); }
  ~LogScope() { SubscriptionLog::set(nullptr); }
};

// Takes one row of `sub` and ends it; its id (0: none).
RowId take_and_end(const std::shared_ptr<QueueTable>& sub) {
  Consumer c;
  int idx = -1;
  if (!c.wait({{sub, nullptr}}, milliseconds(0), &idx).ok() || idx < 0) return 0;
  const RowId id = c.owned_rowid();
  return c.end().ok() ? id : 0;
}

std::vector<RowId> ids_of(QueueTable& t) {
  std::vector<RowId> out;
  for (auto& r : scan(t)) out.push_back(r.first);
  return out;
}

}  // namespace

TEST(a_primary_logs_subscriptions_their_ends_and_the_rows_removed) {
  LogScope scope;
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  REQUIRE(insert1(*t, "old").ok());  // row 1: before both
  Subscriptions* subs = t->subscriptions();
  REQUIRE(subs);
  REQUIRE(subs->create("a", "", false).ok());
  REQUIRE(subs->create("b", "", false).ok());
  REQUIRE(insert1(*t, "x").ok());  // row 2
  CHECK_EQ(take_and_end(subs->find("a")), RowId(2));
  CHECK_EQ(take_and_end(subs->find("b")), RowId(2));  // the last to end it: removed
  REQUIRE(subs->drop("a").ok());
  auto& e = scope.log.entries;
  REQUIRE(e.size() == 5);
  CHECK(e[0].what == "subscribed" && e[0].name == "a" && e[0].start == 2);
  CHECK(e[1].what == "subscribed" && e[1].name == "b" && e[1].start == 2);
  CHECK(e[2].what == "ended" && e[2].name == "a" && e[2].ended == std::vector<RowId>{2} && e[2].removed.empty());
  CHECK(e[3].what == "ended" && e[3].name == "b" && e[3].ended == std::vector<RowId>{2} &&
        e[3].removed == std::vector<RowId>{2});
  CHECK(e[4].what == "unsubscribed" && e[4].name == "a");
  CHECK(ids_of(*t) == std::vector<RowId>{1});
}

TEST(a_replica_applies_what_the_log_names_once_and_keeps_it_across_a_reopen) {
  LogScope scope;
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  for (const char* r : {"1", "2", "3"}) REQUIRE(insert1(*t, r).ok());
  Subscriptions* subs = t->subscriptions();
  // Made with the primary's start (row 2), whatever this table's next id is.
  REQUIRE(subs->apply_subscribe("a", "", 2).ok());
  REQUIRE(subs->apply_subscribe("b", "k = 1", 2).ok());
  CHECK(subs->apply_subscribe("a", "", 2).ok());                               // applied already
  CHECK(subs->apply_subscribe("a", "", 3).code() == ErrorCode::kExists);       // another start
  auto list = subs->list();
  REQUIRE(list.size() == 2);
  CHECK(list[0].start == 2 && list[1].start == 2 && list[1].condition == "k = 1");
  // a ended 2 and 3; b ended 2, and the table removed it.
  REQUIRE(subs->apply_ends("a", {2, 3}, {}).ok());
  REQUIRE(subs->apply_ends("b", {2}, {2}).ok());
  REQUIRE(subs->apply_ends("b", {2}, {2}).ok());  // again: row 2 is gone, nothing to do
  CHECK(ids_of(*t) == (std::vector<RowId>{1, 3}));
  // An end logged after its subscription's drop: only its removals count.
  REQUIRE(subs->apply_unsubscribe("a").ok());
  REQUIRE(subs->apply_unsubscribe("a").ok());  // applied already
  CHECK(ids_of(*t) == (std::vector<RowId>{1, 3}));  // a replica's drop removes no row itself
  REQUIRE(subs->apply_ends("a", {3}, {}).ok());
  CHECK(ids_of(*t) == (std::vector<RowId>{1, 3}));
  // Row 1 is older than b: a plain row. Row 3 is b's, pending.
  list = subs->list();
  REQUIRE(list.size() == 1);
  CHECK_EQ(list[0].pending_rows, 1u);
  // Reopened (a restart): b, its start, and its ends are in the file.
  t.reset();
  t = reopen(path);
  REQUIRE(t);
  list = t->subscriptions()->list();
  REQUIRE(list.size() == 1);
  CHECK(list[0].name == "b" && list[0].start == 2 && list[0].pending_rows == 1);
  CHECK(ids_of(*t) == (std::vector<RowId>{1, 3}));
  // Each apply was logged again, for a chained replica.
  size_t subscribed = 0, ended = 0, unsubscribed = 0;
  for (auto& e : scope.log.entries) {
    subscribed += e.what == "subscribed";
    ended += e.what == "ended";
    unsubscribed += e.what == "unsubscribed";
  }
  CHECK_EQ(subscribed, 2u);
  CHECK(ended >= 3u);
  CHECK_EQ(unsubscribed, 1u);
}

