// Relay dedup (queue_set_srcid): durable with the row, rebuilt by recovery,
// kept by compaction and truncate.
#include "check.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

// Closes every table, then for each length in [from, to] cuts the file at `path` to that
// length, reopens it (recovery) and hands the table and the length to check().
template <class Check>
void for_each_cut(const std::string& path, uint64_t from, uint64_t to, Check check) {
  TableRegistry::instance().close_all();
  const std::string bytes = read_file_bytes(path);
  for (uint64_t len = from; len <= to; len++) {
    write_file_bytes(path, bytes.substr(0, len));
    Status s;
    auto t = reopen(path, &s);
    REQUIRE(t);
    check(*t, len);
  }
}

}  // namespace

TEST(dedup_drops_old_rows_and_reset_forgets) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  bool acc = false;
  REQUIRE(relay1(*t, "r5", 7, 5, false, &acc).ok());
  CHECK(acc);
  REQUIRE(relay1(*t, "r5 again", 7, 5, false, &acc).ok());
  CHECK(!acc);
  REQUIRE(relay1(*t, "r3", 7, 3, false, &acc).ok());
  CHECK(!acc);
  REQUIRE(relay1(*t, "other source", 8, 1, false, &acc).ok());
  CHECK(acc);
  CHECK_EQ(t->last_relayed_rowid(7), 5u);
  CHECK_EQ(t->last_relayed_rowid(8), 1u);
  CHECK_EQ(t->last_relayed_rowid(9), 0u);
  REQUIRE(relay1(*t, "r2 after reset", 7, 2, true, &acc).ok());
  CHECK(acc);
  CHECK_EQ(t->last_relayed_rowid(7), 2u);
  CHECK_EQ(scan(*t).size(), 3u);
}

// The original did not rebuild this state in recovery: duplicates after a crash.
TEST(dedup_state_survives_reopen_and_compaction) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  bool acc;
  for (RowId r = 1; r <= 10; r++) REQUIRE(relay1(*t, "row" + std::to_string(r), 3, r, false, &acc).ok());
  t.reset();
  Status s;
  t = reopen(path, &s);  // recovery
  REQUIRE(t);
  CHECK_EQ(t->last_relayed_rowid(3), 10u);
  REQUIRE(relay1(*t, "dup", 3, 10, false, &acc).ok());
  CHECK(!acc);
  // consume everything, compact: the state must still be there
  Consumer c;
  int idx;
  while (c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok() && idx) {
  }
  CHECK_EQ(t->info().rows, 0u);
  REQUIRE(t->compact().ok());
  CHECK_EQ(t->last_relayed_rowid(3), 10u);
  t.reset();
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(t->last_relayed_rowid(3), 10u);
  REQUIRE(relay1(*t, "dup", 3, 7, false, &acc).ok());
  CHECK(!acc);
  REQUIRE(relay1(*t, "new", 3, 11, false, &acc).ok());
  CHECK(acc);
  REQUIRE(t->truncate().ok());
  t.reset();
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(t->last_relayed_rowid(3), 11u);
}

TEST(dedup_state_is_in_the_rows_chunk) {
  // A cut right after the row's chunk keeps both the row and its source state.
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  bool acc;
  REQUIRE(relay1(*t, "a", 1, 100, false, &acc).ok());
  uint64_t end1 = t->info().file_bytes;
  REQUIRE(relay1(*t, "b", 1, 101, false, &acc).ok());
  const uint64_t end2 = t->info().file_bytes;
  t.reset();
  for_each_cut(path, end1, end2 - 1, [](QueueTable& cut, uint64_t) {
    CHECK_EQ(scan(cut).size(), 1u);
    CHECK_EQ(cut.last_relayed_rowid(1), 100u);
  });
}

// A relayed batch (q4m-forward --batch): the rows received before are always a prefix
// (source ids increase); the rest and the new record go into one chunk.
TEST(relayed_batch_drops_the_received_prefix_and_keeps_the_rest) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string_view> first{"r2", "r4", "r6"};
  const RowId first_ids[] = {2, 4, 6};
  size_t dropped = 99;
  REQUIRE(t->insert_relayed(first, 5, first_ids, false, &dropped).ok());
  CHECK_EQ(dropped, 0u);
  CHECK_EQ(t->last_relayed_rowid(5), 6u);
  // A replay of the batch with newer rows behind it (the source returned the batch).
  std::vector<std::string_view> replay{"r2", "r4", "r6", "r7", "r9"};
  const RowId replay_ids[] = {2, 4, 6, 7, 9};
  REQUIRE(t->insert_relayed(replay, 5, replay_ids, false, &dropped).ok());
  CHECK_EQ(dropped, 3u);
  CHECK_EQ(t->last_relayed_rowid(5), 9u);
  std::vector<std::string> payloads;
  for (const auto& row : scan(*t)) payloads.push_back(row.second);
  CHECK(payloads == (std::vector<std::string>{"r2", "r4", "r6", "r7", "r9"}));
  // All received: nothing written, record unchanged.
  uint64_t bytes = t->info().file_bytes;
  REQUIRE(t->insert_relayed(replay, 5, replay_ids, false, &dropped).ok());
  CHECK_EQ(dropped, 5u);
  CHECK_EQ(t->info().file_bytes, bytes);
  CHECK_EQ(t->last_relayed_rowid(5), 9u);
}

TEST(relayed_batch_refuses_ids_that_do_not_increase) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string_view> rows{"a", "b"};
  size_t dropped = 0;
  const RowId same[] = {3, 3};
  Status s = t->insert_relayed(rows, 1, same, false, &dropped);
  CHECK(s.code() == ErrorCode::kInvalid);
  const RowId zero[] = {0, 1};
  CHECK(t->insert_relayed(rows, 1, zero, false, &dropped).code() == ErrorCode::kInvalid);
  CHECK_EQ(scan(*t).size(), 0u);
  CHECK_EQ(t->last_relayed_rowid(1), 0u);
}

TEST(relayed_batch_is_one_chunk) {
  // A cut anywhere inside the batch's chunk keeps none of its rows and the old record.
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  bool acc;
  REQUIRE(relay1(*t, "a", 1, 100, false, &acc).ok());
  uint64_t end1 = t->info().file_bytes;
  std::vector<std::string_view> rows{"b", "c", "d"};
  const RowId ids[] = {101, 102, 103};
  size_t dropped;
  REQUIRE(t->insert_relayed(rows, 1, ids, false, &dropped).ok());
  const uint64_t end2 = t->info().file_bytes;
  t.reset();
  for_each_cut(path, end1, end2, [&](QueueTable& cut, uint64_t len) {
    const bool whole = len == end2;
    CHECK_EQ(scan(cut).size(), whole ? 4u : 1u);
    CHECK_EQ(cut.last_relayed_rowid(1), whole ? 103u : 100u);
  });
}

// What queue_apply_srcid does outside a transaction: a transaction of its own, committed.
static Status record_relay_source(const std::shared_ptr<QueueTable>& t, uint32_t source, RowId last) {
  Transaction txn(1);
  txn.record_relay(t, source, last);
  return txn.commit();
}

// A replica records its primary's relay source without rows (queue_apply_srcid): durably, and
// later relays of that source are replays up to there.
TEST(a_recorded_relay_source_needs_no_rows_and_survives_reopen) {
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(record_relay_source(t, 5, 42).ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->last_relayed_rowid(5), 42u);
  t.reset();
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(t->last_relayed_rowid(5), 42u);
  bool acc;
  REQUIRE(relay1(*t, "resent", 5, 42, false, &acc).ok());
  CHECK(!acc);
  REQUIRE(relay1(*t, "new", 5, 43, false, &acc).ok());
  CHECK(acc);
  REQUIRE(record_relay_source(t, 5, 7).ok());  // as the primary's mode 'w' set it: lower too
  CHECK_EQ(t->last_relayed_rowid(5), 7u);
}
