// QueueTable::insert_with_history / next_row(..., history): a copy of a queue's rows (a
// copying ALTER TABLE) keeps what each row has been through: its insert time (MESSAGE_TTL
// counts from it), its delivery count (MAX_DELIVERIES: dead rows stay dead) and a pending
// retry delay, in memory and in the file. (Its ids and owners: storage_takeover_test.)
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

void deliver_and_abort(const std::shared_ptr<QueueTable>& t, int times) {
  for (int i = 0; i < times; i++) {
    Consumer c;
    if (!take(c, t)) return;
    (void)c.abort();
  }
}

// Takes every row `t` hands out now; their payloads with the delivery count each came with.
std::vector<std::pair<std::string, uint32_t>> take_all(const std::shared_ptr<QueueTable>& t) {
  std::vector<std::pair<std::string, uint32_t>> out;
  std::vector<std::unique_ptr<Consumer>> owners;  // keep them owned: each take gets a new row
  for (;;) {
    owners.push_back(std::make_unique<Consumer>());
    Consumer& c = *owners.back();
    if (!take(c, t)) break;
    std::string payload;
    bool found = false;
    RowId id = 0;
    if (!t->next_visible(&c, 0, &id, &payload, &found).ok() || !found) break;
    out.emplace_back(payload, c.owned_delivery_count());
  }
  return out;
}

}  // namespace

TEST(a_copy_keeps_each_rows_age_deliveries_retry_delay_and_death) {
  TempDir dir;
  auto src = table_with(dir.file("src"), {"delayed", "dead", "retried", "fresh"});
  REQUIRE(src);
  set_option(*src, &TableOptions::max_deliveries, 3);
  // Takes hand out the first free row: each step below works on the next row in line.
  Consumer c;
  REQUIRE(take(c, src));
  REQUIRE(c.abort(milliseconds(60000)).ok());  // "delayed": 1 delivery, back in a minute
  deliver_and_abort(src, 3);                  // "dead": 3 deliveries, dead
  deliver_and_abort(src, 2);                  // "retried": 2 deliveries
  CHECK_EQ(src->info().dead_rows, 1u);
  CHECK_EQ(src->info().delayed_rows, 1u);
  Consumer owner;  // "retried" is out a third time during the copy: held back for its owner
  REQUIRE(take(owner, src));
  std::this_thread::sleep_for(milliseconds(60));

  const std::string dst_path = dir.file("dst");
  auto dst = create_and_open(dst_path);
  REQUIRE(dst);
  set_option(*dst, &TableOptions::max_deliveries, 3);  // the engine hands the new table its options before the copy
  REQUIRE(copy_rows(*src, *dst).ok());
  REQUIRE(dst->take_over(src, true).ok());  // the end of the ALTER: "retried" is still owner's
  TableStats info = dst->info();
  CHECK_EQ(info.rows, 4u);
  CHECK_EQ(info.owned_rows, 1u);
  CHECK_EQ(info.dead_rows, 1u);
  CHECK_EQ(info.delayed_rows, 1u);
  CHECK(info.oldest_age_ms >= 60);  // the rows kept their insert time
  // The file holds the same, the delivery in progress not counted, as across a restart: a
  // crash copy of it (recovery from the records, no snapshot), made before the takes below
  // add deliveries.
  auto crashed = crash_copy(dir, dst_path, "dst_crashed");
  REQUIRE(crashed);

  auto taken = take_all(dst);
  REQUIRE(taken.size() == 1u);
  CHECK(taken[0] == std::make_pair(std::string("fresh"), 1u));
  // Back from its third delivery, "retried" is dead too (MAX_DELIVERIES 3).
  REQUIRE(owner.abort().ok());
  CHECK_EQ(dst->info().dead_rows, 2u);

  set_option(*crashed, &TableOptions::max_deliveries, 3);
  info = crashed->info();
  CHECK_EQ(info.rows, 4u);
  CHECK_EQ(info.dead_rows, 1u);
  CHECK_EQ(info.delayed_rows, 1u);
  CHECK(info.oldest_age_ms >= 60);
  taken = take_all(crashed);
  REQUIRE(taken.size() == 2u);
  CHECK(taken[0] == std::make_pair(std::string("retried"), 3u));
}

TEST(a_copied_row_expires_by_its_original_insert_time) {
  TempDir dir;
  auto src = table_with(dir.file("src"), {"old"});
  REQUIRE(src);
  std::this_thread::sleep_for(milliseconds(300));
  auto dst = create_and_open(dir.file("dst"));
  REQUIRE(dst);
  set_option(*dst, &TableOptions::message_ttl, milliseconds(200));  // past for "old" already, not for a new row
  REQUIRE(copy_rows(*src, *dst).ok());
  for (int i = 0; i < 200 && dst->info().rows > 0; i++) std::this_thread::sleep_for(milliseconds(10));
  CHECK_EQ(dst->info().rows, 0u);
  CHECK_EQ(dst->counters().rows_expired.get(), 1u);

  // A row copied from another engine has no history: new, as an INSERT.
  std::vector<std::string_view> rows{"new"};
  REQUIRE(dst->insert_with_history(rows, {RowHistory{}}).ok());
  CHECK_EQ(dst->info().rows, 1u);
  Consumer c;
  REQUIRE(take(c, dst));
  CHECK_EQ(c.owned_delivery_count(), 1u);
}

TEST(histories_must_match_the_rows) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string_view> rows{"a", "b"};
  Status s = t->insert_with_history(rows, {RowHistory{}});
  CHECK(s.code() == ErrorCode::kInvalid);
  CHECK_EQ(t->info().rows, 0u);
}
