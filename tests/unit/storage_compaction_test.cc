// Compaction: live rows keep their ids, payloads and owners; the file shrinks;
// automatic compaction follows the settings.
#include "core/file/format.h"
#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

TEST(compaction_keeps_ids_payloads_and_owners) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  std::vector<RowId> ids;
  for (int i = 0; i < 100; i++) {
    RowId id;
    REQUIRE(insert1(*t, "payload-" + std::to_string(i) + std::string(100, 'p'), &id).ok());
    ids.push_back(id);
  }
  Consumer eater, holder;
  int idx;
  for (int i = 0; i < 60; i++) REQUIRE(eater.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(eater.end().ok());
  REQUIRE(holder.wait({{t, nullptr}}, milliseconds(0), &idx).ok());  // owns row 60 across compaction
  CHECK_EQ(holder.owned_rowid(), ids[60]);
  TableStats before = t->info();
  CHECK(before.removed_bytes > 0);
  REQUIRE(t->compact().ok());
  TableStats after = t->info();
  CHECK(after.file_bytes < before.file_bytes);
  CHECK(after.removed_bytes < 200);  // only chunk headers and META remain
  CHECK_EQ(after.rows, 40u);
  CHECK_EQ(after.owned_rows, 1u);
  CHECK_EQ(after.next_rowid, before.next_rowid);
  CHECK_EQ(t->counters().compactions.get(), 1u);
  // the owner still owns and reads its row; others still do not see it
  auto mine = scan(*t, &holder);
  REQUIRE(mine.size() == 1);
  CHECK_EQ(mine[0].second, "payload-60" + std::string(100, 'p'));
  auto others = scan(*t, &eater);
  REQUIRE(others.size() == 39);
  for (size_t i = 0; i < others.size(); i++) {
    CHECK_EQ(others[i].first, ids[61 + i]);
    CHECK_EQ(others[i].second, "payload-" + std::to_string(61 + i) + std::string(100, 'p'));
  }
  REQUIRE(holder.end().ok());
  RowId next;
  REQUIRE(insert1(*t, "after", &next).ok());
  CHECK(next > ids.back());
  t.reset();
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  auto rows = scan(*t);
  REQUIRE(rows.size() == 40);
  CHECK_EQ(rows.front().first, ids[61]);
  CHECK_EQ(rows.back().first, next);
  CHECK_EQ(t->counters().rows_inserted.get(), 101u);
  CHECK_EQ(t->counters().rows_removed.get(), 61u);
}

TEST(automatic_compaction_after_commit) {
  SyncModeScope sync(SyncMode::kNone);
  auto& cfg = settings();
  uint64_t old_min = cfg.compaction_min_file_bytes.load();
  cfg.compaction_min_file_bytes = 64 * 1024;
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  uint64_t compactions_before = global_stats().compactions.get();
  std::string row(1000, 'r');
  Consumer c;
  int idx;
  for (int i = 0; i < 300; i++) {
    REQUIRE(insert1(*t, row).ok());
    REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  }
  REQUIRE(c.end().ok());
  cfg.compaction_min_file_bytes = old_min;
  CHECK(global_stats().compactions.get() > compactions_before);
  CHECK(t->counters().compactions.get() > 0);
  CHECK(t->info().file_bytes < 64 * 1024 + 4096);
  CHECK_EQ(t->info().rows, 0u);
}

TEST(truncate_every_offset_of_a_compacted_file) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  bool acc;
  for (int i = 1; i <= 6; i++) REQUIRE(relay1(*t, "r" + std::to_string(i), 2, i, false, &acc).ok());
  Consumer c;
  int idx;
  for (int i = 0; i < 3; i++) REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  REQUIRE(t->compact().ok());
  uint64_t compacted_end = t->info().file_bytes;
  RowId last;
  REQUIRE(insert1(*t, "tail", &last).ok());
  t.reset();
  TableRegistry::instance().close_all();
  std::string bytes = read_file_bytes(path);
  // Sync mode none flags the tail's chunk: the clean close's synced mark follows it.
  const uint64_t tail_end = bytes.size() - fmt::kChunkHeaderSize;
  CHECK_EQ(bytes.substr(tail_end), fmt::synced_mark_chunk());
  for (uint64_t len = compacted_end; len <= bytes.size(); len++) {
    std::string p = dir.file("cut");
    write_file_bytes(p, bytes.substr(0, len));
    std::shared_ptr<QueueTable> r;
    Status s = TableRegistry::instance().acquire(p, &r);
    REQUIRE(s.ok());
    auto rows = scan(*r);
    CHECK_EQ(rows.size(), len >= tail_end ? 4u : 3u);
    CHECK_EQ(rows.at(0).second, "r4");
    CHECK_EQ(r->last_relayed_rowid(2), 6u);
    CHECK(r->info().next_rowid > (len >= tail_end ? last : last - 1));
    r.reset();
    TableRegistry::instance().drop(p);
  }
}
