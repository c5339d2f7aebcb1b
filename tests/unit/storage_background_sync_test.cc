// The background sync (core/table/background_sync.h): with the prepares redone from the binary
// log nothing on the commit path syncs a table's file, so every chunk after the last sync is
// flagged `unsynced` and a chunk damaged among them reads as a lost tail after a crash. A
// background sync (and, once the table is idle, its synced mark) makes a chunk damaged before
// it corruption again.
#include "check.h"

#include "core/file/format.h"
#include "core/table/background_sync.h"
#include "core/table/transaction.h"
#include "core/util/stats.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

// An autocommit INSERT as the binary log coordinates it: prepare and commit record unsynced.
void insert_redone(const std::shared_ptr<QueueTable>& t, const std::string& row, int n) {
  RedoingLog log;
  Transaction txn(n);
  txn.set_replication_log(&log);
  txn.insert(t, row);
  REQUIRE(txn.prepare("xid-" + std::to_string(n)).ok());
  txn.queue_commit(/*durable=*/false);
  REQUIRE(txn.commit().ok());
}

std::string body(int i) { return "row body " + std::to_string(100 + i) + std::string(40, 'x'); }

// Flips a byte of row i's payload in `bytes`.
void damage_row(std::string* bytes, int i) {
  const size_t at = bytes->find(body(i));
  REQUIRE(at != std::string::npos);
  (*bytes)[at + 5] ^= 0x08;
}

// The crash images: rows 1-10 inserted, then `passes` background passes, then rows 11-20
// (`more_writes`) or nothing (idle: a second pass writes the mark); row 5's chunk damaged
// afterwards, as a bad sector would. Written to "c" in `dir`.
void crash_image(TempDir& dir, int passes, bool more_writes) {
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  for (int i = 1; i <= 10; i++) insert_redone(t, body(i), i);
  for (int p = 0; p < passes; p++) REQUIRE(t->sync_in_background().ok());
  if (more_writes)
    for (int i = 11; i <= 20; i++) insert_redone(t, body(i), i);
  std::string bytes = read_file_bytes(dir.file("t"));
  damage_row(&bytes, 5);
  write_file_bytes(dir.file("c"), bytes);
}

}  // namespace

TEST(the_first_pass_syncs_unsynced_writes_the_next_marks_an_idle_flagged_tail) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  for (int i = 1; i <= 3; i++) insert_redone(t, body(i), i);
  const uint64_t syncs = global_stats().sys_sync.get(), passes = global_stats().background_syncs.get(),
                 marks = global_stats().background_sync_marks.get();
  REQUIRE(t->sync_in_background().ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);
  CHECK_EQ(global_stats().background_syncs.get(), passes + 1);
  const uint64_t size = read_file_bytes(dir.file("t")).size();
  REQUIRE(t->sync_in_background().ok());  // idle, last chunk flagged: the mark, synced
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 2);
  CHECK_EQ(global_stats().background_sync_marks.get(), marks + 1);
  REQUIRE(t->sync_in_background().ok());  // nothing more to do
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 2);
  CHECK_EQ(global_stats().background_syncs.get(), passes + 1);
  CHECK(read_file_bytes(dir.file("t")).size() >= size);
  insert_redone(t, body(4), 4);  // readers see rows written after the mark
  CHECK_EQ(scan(*t).size(), 4u);
}

TEST(sync_mode_none_is_not_synced_in_the_background) {
  SyncModeScope none(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  REQUIRE(insert1(*t, "a").ok());
  const uint64_t syncs = global_stats().sys_sync.get();
  REQUIRE(t->sync_in_background().ok());
  REQUIRE(t->sync_in_background().ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs);
}

TEST(a_chunk_damaged_before_a_background_sync_is_corruption_not_a_lost_tail) {
  SyncModeScope durable(SyncMode::kFdatasync);
  for (const bool more_writes : {true, false}) {
    TempDir dir;
    crash_image(dir, more_writes ? 1 : 2, more_writes);
    Status s;
    std::shared_ptr<QueueTable> t;
    s = TableRegistry::instance().acquire(dir.file("c"), &t);
    CHECK(s.code() == ErrorCode::kCorrupt);
    CHECK(s.message().find("chunk body checksum mismatch") != std::string::npos);
    TableRegistry::instance().close_all();
  }
}

TEST(without_a_background_sync_the_same_damage_is_cut_as_a_lost_tail) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  crash_image(dir, 0, true);
  std::shared_ptr<QueueTable> t;
  REQUIRE(TableRegistry::instance().acquire(dir.file("c"), &t).ok());
  CHECK_EQ(t->info().rows, 4u);  // rows 1-4: the rest was cut (the binary log's redo brings it back)
  TableRegistry::instance().close_all();
}

TEST(the_thread_passes_every_interval_and_stops) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  insert_redone(t, body(1), 1);
  const uint64_t passes = global_stats().background_syncs.get();
  BackgroundSync::instance().set_interval_ms(5);
  CHECK(eventually([&] { return global_stats().background_syncs.get() > passes; }));
  BackgroundSync::instance().stop();
  CHECK_EQ(BackgroundSync::instance().interval_ms(), 0u);
  insert_redone(t, body(2), 2);
  const uint64_t after = global_stats().background_syncs.get();
  REQUIRE(t->info().rows == 2u);
  CHECK_EQ(global_stats().background_syncs.get(), after);  // stopped: nobody syncs it
  TableRegistry::instance().close_all();
}
