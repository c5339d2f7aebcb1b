// History (HISTORY_RETENTION, core/table/history.cc): ended rows stay readable for the
// retention period, with how they ended and their delivery counts; the HISTORY record is
// written with the removal, compaction keeps the young ones and drops the old ones, a crash
// and a clean reopen keep what was committed.
#include "core/file/recovery.h"
#include <atomic>
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

struct Seen {
  RowId id;
  std::string kind;
  uint16_t deliveries;
  std::string payload;
};

std::vector<Seen> history(QueueTable& t) {
  std::vector<EndedRow> rows;
  std::shared_ptr<DataFile> file;
  std::vector<Seen> out;
  if (!t.history_rows(&rows, &file).ok()) return out;
  for (const EndedRow& r : rows) {
    std::string payload;
    if (!t.read_history_row(file, r, &payload).ok()) payload = "<unreadable>";
    out.push_back(Seen{r.id, end_kind_name(r.kind), r.deliveries, payload});
  }
  return out;
}

std::string describe(const std::vector<Seen>& h) {
  std::string s;
  for (const Seen& r : h)
    s += std::to_string(r.id) + ":" + r.kind + ":" + std::to_string(r.deliveries) + ":" + r.payload + " ";
  return s;
}

// Consumed (delivered twice), deleted, purged (dead after one delivery), expired.
std::string make_history(const std::shared_ptr<QueueTable>& t) {
  set_option(*t, &TableOptions::history_retention, milliseconds(3600 * 1000));
  set_option(*t, &TableOptions::max_deliveries, 2);
  for (const char* p : {"a", "b", "c", "d", "e"}) insert1(*t, p);
  Consumer c;
  int idx;
  c.wait({{t, nullptr}}, milliseconds(0), &idx);  // a
  c.abort();
  c.wait({{t, nullptr}}, milliseconds(0), &idx);  // a again
  c.end();                                         // consumed, 2 deliveries
  Consumer d;
  t->claim_for_delete(&d, 2);  // b
  t->remove_claimed(&d);       // deleted, 0 deliveries
  c.wait({{t, nullptr}}, milliseconds(0), &idx);  // c
  c.abort();
  c.wait({{t, nullptr}}, milliseconds(0), &idx);  // c again: dead when it comes back
  c.abort();
  size_t purged = 0;
  t->purge_dead(10, &purged);  // purged, 2 deliveries
  return describe(history(*t));
}

// A table opened again keeps its history until configured (the engine configures every
// table it opens): configured with the retention here.
std::shared_ptr<QueueTable> kept(std::shared_ptr<QueueTable> t) {
  if (t) set_option(*t, &TableOptions::history_retention, milliseconds(3600 * 1000));
  return t;
}

const char* kExpected = "1:consumed:2:a 2:deleted:0:b 3:purged:2:c ";

}  // namespace

TEST(history_record_round_trip) {
  std::string out;
  fmt::ChunkBuilder b(&out);
  const fmt::HistoryEntry e[2] = {{7, 1234567890123ull, 1, 3}, {9, 42, 4, 65535}};
  b.add_history(e, 2);
  const size_t at = b.add_history_row(11, 99, "payload", fmt::row_checksum(11, "payload"), fmt::HistoryEntry{11, 77, 2, 5});
  b.finish();
  fmt::RecordReader r(std::string_view(out).substr(fmt::kChunkHeaderSize));
  fmt::Record rec;
  REQUIRE(r.next(&rec));
  CHECK(rec.type == fmt::kHistory);
  CHECK_EQ(rec.count, 2u);
  CHECK_EQ(r.history_entry(rec, 0).id, 7u);
  CHECK_EQ(r.history_entry(rec, 0).end_ms, 1234567890123ull);
  CHECK_EQ(r.history_entry(rec, 0).kind, 1);
  CHECK_EQ(r.history_entry(rec, 0).deliveries, 3);
  CHECK_EQ(r.history_entry(rec, 1).deliveries, 65535);
  REQUIRE(r.next(&rec));
  CHECK(rec.type == fmt::kHistoryRow);
  CHECK_EQ(rec.rowid, 11u);
  CHECK_EQ(rec.time_ms, 99u);
  CHECK_EQ(rec.payload_pos + fmt::kChunkHeaderSize, at);
  CHECK_EQ(std::string(out.substr(at, rec.length)), "payload");
  CHECK_EQ(rec.checksum, fmt::row_checksum(11, "payload"));
  CHECK_EQ(rec.ended.end_ms, 77u);
  CHECK_EQ(rec.ended.kind, 2);
  CHECK_EQ(rec.ended.deliveries, 5);
  CHECK(!r.next(&rec));
  CHECK(r.error().empty());
}

TEST(every_end_is_kept_with_its_kind_and_never_handed_out) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(make_history(t), std::string(kExpected));
  TableStats s = t->info();
  CHECK_EQ(s.rows, 2u);  // d and e
  CHECK_EQ(s.history_rows, 3u);
  CHECK_EQ(s.history_bytes, 3u);
  Consumer c;
  int idx;
  std::vector<std::string> got;
  while (c.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && c.owned_rowid()) {
    got.push_back(scan(*t, &c).at(0).second);
    c.end();
  }
  CHECK_EQ(got.size(), 2u);  // d and e only: history rows are never handed out
  CHECK_EQ(history(*t).size(), 5u);
  CHECK_EQ(history(*t)[3].kind, std::string("consumed"));
  CHECK_EQ(history(*t)[3].deliveries, 1);
  CHECK_EQ(scan(*t).size(), 0u);  // a scan of the queue does not see them
}

TEST(off_keeps_nothing) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  insert1(*t, "x");
  Consumer c;
  int idx;
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  CHECK(history(*t).empty());
  CHECK_EQ(t->info().history_rows, 0u);
}

TEST(expired_rows_are_kept_as_expired) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::history_retention, milliseconds(3600 * 1000));
  set_option(*t, &TableOptions::message_ttl, milliseconds(100));
  insert1(*t, "old");
  CHECK(eventually([&] { return t->info().rows == 0; }));
  CHECK_EQ(describe(history(*t)), std::string("1:expired:0:old "));
}

TEST(a_crash_a_clean_reopen_and_compaction_keep_the_history) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  CHECK_EQ(make_history(t), std::string(kExpected));
  auto crashed = kept(crash_copy(dir, path, "crashed"));
  REQUIRE(crashed);
  CHECK_EQ(describe(history(*crashed)), std::string(kExpected));
  CHECK_EQ(crashed->info().rows, 2u);
  crashed.reset();
  REQUIRE(t->compact().ok());
  CHECK_EQ(describe(history(*t)), std::string(kExpected));
  auto after_compaction = kept(crash_copy(dir, path, "compacted"));
  REQUIRE(after_compaction);
  CHECK_EQ(describe(history(*after_compaction)), std::string(kExpected));
  after_compaction.reset();
  // A row that ends after the compaction, then a clean reopen (no index snapshot: the open
  // reads the file's history records).
  Consumer c;
  int idx;
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  t.reset();
  Status s;
  t = kept(reopen(path, &s));
  REQUIRE(t);
  CHECK_EQ(describe(history(*t)), std::string(kExpected) + "4:consumed:1:d ");
  CHECK_EQ(t->info().rows, 1u);
}

TEST(compaction_copies_rows_that_end_during_it) {
  // Rows consumed after phase 1 copied them as live rows: a HISTORY record before the REMOVE
  // in the new file (without it they would be lost from the history at the next open).
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  set_option(*t, &TableOptions::history_retention, milliseconds(3600 * 1000));
  constexpr int kRows = 20000;
  const std::string pad(200, 'p');
  for (int i = 0; i < kRows; i += 1000) {
    std::vector<std::string> rows;
    for (int k = i; k < i + 1000; k++) rows.push_back("r" + std::to_string(k) + pad);
    std::vector<std::string_view> views(rows.begin(), rows.end());
    REQUIRE(t->insert(views, nullptr).ok());
  }
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    Consumer c;
    int idx;
    while (c.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && c.owned_rowid()) c.end();
    done = true;
  });
  int compactions = 0;
  while (!done) {
    REQUIRE(t->compact().ok());
    compactions++;
  }
  consumer.join();
  CHECK(compactions > 1);
  auto copy = kept(crash_copy(dir, path, "copy"));
  REQUIRE(copy);
  auto h = history(*copy);
  REQUIRE(h.size() == size_t(kRows));
  for (int i = 0; i < kRows; i++) CHECK_EQ(h[i].payload, "r" + std::to_string(i) + pad);
  CHECK_EQ(history(*t).size(), size_t(kRows));
}

TEST(compaction_copies_rows_inserted_and_ended_during_it) {
  // Rows inserted and ended while phase 1 copied: neither phase copies them as live rows, so
  // phase 2 copies them as HISTORY_ROWs.
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  set_option(*t, &TableOptions::history_retention, milliseconds(3600 * 1000));
  constexpr int kRows = 20000;
  const std::string pad(200, 'p');
  std::atomic<bool> produced{false}, done{false};
  std::thread producer([&] {
    for (int i = 0; i < kRows; i += 100) {
      std::vector<std::string> rows;
      for (int k = i; k < i + 100; k++) rows.push_back("r" + std::to_string(k) + pad);
      std::vector<std::string_view> views(rows.begin(), rows.end());
      t->insert(views, nullptr);
    }
    produced = true;
  });
  std::thread consumer([&] {
    Consumer c;
    int idx;
    for (;;) {
      const bool last = produced;
      if (c.wait({{t, nullptr}}, milliseconds(0), &idx).ok() && c.owned_rowid()) {
        c.end();
        continue;
      }
      if (last) break;
    }
    done = true;
  });
  while (!done) REQUIRE(t->compact().ok());
  producer.join();
  consumer.join();
  auto copy = kept(crash_copy(dir, path, "copy"));
  REQUIRE(copy);
  auto h = history(*copy);
  REQUIRE(h.size() == size_t(kRows));
  for (int i = 0; i < kRows; i++) CHECK_EQ(h[i].payload, "r" + std::to_string(i) + pad);
}

TEST(rows_past_the_retention_are_dropped_from_memory_and_by_compaction) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  set_option(*t, &TableOptions::history_retention, milliseconds(300));
  insert1(*t, std::string(1000, 'x'));
  Consumer c;
  int idx;
  REQUIRE(c.wait({{t, nullptr}}, milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  CHECK_EQ(history(*t).size(), 1u);
  const uint64_t with_history = t->info().file_bytes;
  CHECK(eventually([&] { return history(*t).empty(); }));
  CHECK_EQ(t->info().history_rows, 0u);
  REQUIRE(t->compact().ok());
  CHECK(t->info().file_bytes < with_history - 1000);
  auto copy = crash_copy(dir, path, "copy");
  REQUIRE(copy);
  set_option(*copy, &TableOptions::history_retention, milliseconds(3600 * 1000));
  CHECK(history(*copy).empty());
}

TEST(a_transactions_end_keeps_history_too) {
  // Two-phase: the HISTORY record goes with the committed TXN_END.
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  set_option(*t, &TableOptions::history_retention, milliseconds(3600 * 1000));
  insert1(*t, "p");
  Consumer d;
  Holder txn;
  REQUIRE(t->claim_for_delete(&d, 1, &txn));
  uint64_t part = 0;
  REQUIRE(t->prepare_part(&txn, {}, "xid-1", &part).ok());
  REQUIRE(t->end_part(part, true).ok());
  CHECK_EQ(describe(history(*t)), std::string("1:deleted:0:p "));
  auto copy = kept(crash_copy(dir, path, "copy"));
  REQUIRE(copy);
  CHECK_EQ(describe(history(*copy)), std::string("1:deleted:0:p "));
}


