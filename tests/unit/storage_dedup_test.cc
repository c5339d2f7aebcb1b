// DEDUP_COLUMN (TableOptions::dedup): a row whose key was inserted within the dedup window
// is dropped, whatever became of the earlier row; the keys survive a clean reopen, a crash
// (no index snapshot), compaction and concurrent producers; TRUNCATE forgets them.
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <thread>

#include "core/policy/dedup_window.h"
#include "core/table/transaction.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// Rows of (k VARCHAR NULL, label VARCHAR NOT NULL), deduplicated by k.
std::shared_ptr<const KeyColumn> key_column() { return key_label_column("k"); }

// The payload of a row labelled `label` with key `key` ("" = NULL: no key).
std::string row(const std::string& key, const std::string& label) { return key_label_row(key, label); }

const milliseconds kWindow(300000);  // longer than any test: only expiry tests shorten it

std::shared_ptr<QueueTable> dedup_table(const std::string& path, milliseconds window = kWindow) {
  auto t = create_and_open(path);
  if (t) set_dedup(*t, key_column(), window);
  return t;
}

// Inserts the rows; returns how many were dropped as duplicates (-1 on error).
long insert_rows(QueueTable& t, std::initializer_list<std::string> rows) {
  std::vector<std::string> keep(rows);
  std::vector<std::string_view> views(keep.begin(), keep.end());
  size_t dup = 0;
  return t.insert(views, nullptr, &dup).ok() ? static_cast<long>(dup) : -1;
}

void consume_all(const std::shared_ptr<QueueTable>& t) {
  Consumer c;
  while (take(c, t)) REQUIRE(c.end().ok());
}

}  // namespace

TEST(window_forgets_old_keys_and_undoes_a_batch) {
  DedupWindow w;
  w.set_window_ms(1000);
  w.remember("a", 10'000);
  CHECK(w.contains("a", 10'999));
  CHECK(!w.contains("a", 11'000));  // a key counts for exactly the window
  CHECK_EQ(w.size(), 0u);            // and is forgotten once out of it
  std::vector<std::pair<std::string, uint64_t>> undo;
  w.remember("b", 20'000);
  w.remember("b", 20'500, &undo);  // a later row of the key
  w.remember("c", 20'500, &undo);
  w.forget_batch(&undo);
  CHECK(!w.contains("c", 20'600));
  CHECK(w.contains("b", 20'999));  // back to its earlier time...
  CHECK(!w.contains("b", 21'000));  // ...and its window
  undo.clear();
  CHECK(w.admit("d", 30'000, &undo));
  CHECK(!w.admit("d", 30'999, &undo));  // inside the window: a duplicate, nothing to undo
  CHECK(w.admit("d", 31'000, &undo));   // the window is over: in again, from 31'000
  CHECK(!w.admit("d", 31'999, &undo));
  CHECK_EQ(undo.size(), 2u);
  w.forget_batch(&undo);
  CHECK(w.admit("d", 31'999, &undo));  // both taken back
}

TEST(a_key_inserted_within_the_window_is_dropped_whatever_became_of_its_row) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(insert_rows(*t, {row("order-1", "first"), row("order-2", "other")}), 0);
  CHECK_EQ(insert_rows(*t, {row("order-1", "retry")}), 1);  // queued: dropped
  CHECK_EQ(t->info().rows, 2u);
  consume_all(t);
  CHECK_EQ(insert_rows(*t, {row("order-1", "late retry")}), 1);  // consumed: still dropped
  CHECK_EQ(t->info().rows, 0u);
  // Within one INSERT the first row wins; rows without a key are never duplicates.
  CHECK_EQ(insert_rows(*t, {row("order-3", "a"), row("order-3", "b"), row("", "n1"), row("", "n2")}), 1);
  CHECK_EQ(t->info().rows, 3u);
  CHECK_EQ(t->counters().rows_deduplicated.get(), 3u);
  CHECK_EQ(t->info().dedup_keys, 3u);
  // The ids of the rows written, none for the dropped one.
  std::vector<std::string> rows{row("order-4", "x"), row("order-4", "y"), row("order-5", "z")};
  std::vector<std::string_view> views(rows.begin(), rows.end());
  std::vector<RowId> ids;
  size_t dup = 0;
  REQUIRE(t->insert(views, &ids, &dup).ok());
  CHECK_EQ(dup, 1u);
  CHECK_EQ(ids.size(), 2u);
}

TEST(a_key_goes_in_again_once_its_window_is_over) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"), milliseconds(150));
  REQUIRE(t);
  CHECK_EQ(insert_rows(*t, {row("k", "1")}), 0);
  std::this_thread::sleep_for(milliseconds(200));
  CHECK_EQ(insert_rows(*t, {row("k", "2")}), 0);
  CHECK_EQ(t->info().rows, 2u);
  set_dedup(*t, key_column(), kWindow);  // a longer window (ALTER ... DEDUP_WINDOW) applies at once
  CHECK_EQ(insert_rows(*t, {row("k", "3")}), 1);
}

TEST(keys_survive_a_clean_reopen_a_crash_and_compaction) {
  TempDir dir;
  const std::string path = dir.file("t");
  {
    auto t = dedup_table(path);
    REQUIRE(t);
    CHECK_EQ(insert_rows(*t, {row("gone", "consumed"), row("kept", "queued")}), 0);
    Consumer c;
    REQUIRE(take(c, t));
    REQUIRE(c.end().ok());  // "gone" is consumed: only its bytes in the file remember it
  }
  auto t = reopen(path);  // clean: index snapshot
  REQUIRE(t);
  set_dedup(*t, key_column(), kWindow);
  CHECK_EQ(t->info().dedup_keys, 2u);
  CHECK_EQ(insert_rows(*t, {row("gone", "again"), row("kept", "again")}), 2);
  // A crash: the file's bytes only.
  auto crashed = crash_copy(dir, path, "crashed");
  REQUIRE(crashed);
  set_dedup(*crashed, key_column(), kWindow);
  CHECK_EQ(insert_rows(*crashed, {row("gone", "again"), row("kept", "again")}), 2);
  // Compaction drops the consumed row's bytes and keeps its key (a DEDUP_KEY record).
  CHECK_EQ(insert_rows(*t, {row("new", "x")}), 0);
  consume_all(t);
  REQUIRE(t->compact().ok());
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(insert_rows(*t, {row("gone", "after compaction")}), 1);
  auto compacted = crash_copy(dir, path, "compacted");
  REQUIRE(compacted);
  set_dedup(*compacted, key_column(), kWindow);
  CHECK_EQ(compacted->info().dedup_keys, 3u);
  CHECK_EQ(insert_rows(*compacted, {row("gone", "1"), row("kept", "2"), row("new", "3"), row("fresh", "4")}), 3);
  // Read with a short window, the same file's old keys do not count.
  auto short_window = crash_copy(dir, path, "short");
  REQUIRE(short_window);
  std::this_thread::sleep_for(milliseconds(20));
  set_dedup(*short_window, key_column(), milliseconds(10));
  CHECK_EQ(short_window->info().dedup_keys, 0u);
  CHECK_EQ(insert_rows(*short_window, {row("gone", "1")}), 0);
}

TEST(truncate_forgets_the_keys) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = dedup_table(path);
  REQUIRE(t);
  CHECK_EQ(insert_rows(*t, {row("k", "1")}), 0);
  REQUIRE(t->truncate().ok());
  CHECK_EQ(t->info().dedup_keys, 0u);
  CHECK_EQ(insert_rows(*t, {row("k", "2")}), 0);
  auto crashed = crash_copy(dir, path, "crashed");
  REQUIRE(crashed);
  set_dedup(*crashed, key_column(), kWindow);
  CHECK_EQ(crashed->info().dedup_keys, 1u);  // "2" only: one key
}

TEST(max_rows_counts_only_the_rows_written) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::max_rows, 2);
  CHECK_EQ(insert_rows(*t, {row("a", "1"), row("a", "2"), row("b", "3")}), 1);  // 2 rows: fits
  CHECK_EQ(t->info().rows, 2u);
  // Refused as full: none of its keys is remembered, so the same rows go in once there is room.
  CHECK_EQ(insert_rows(*t, {row("c", "4")}), -1);
  consume_all(t);
  CHECK_EQ(insert_rows(*t, {row("c", "4")}), 0);
}

TEST(a_copy_keeps_every_row_and_its_keys_count_from_their_insert_times) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  std::vector<std::string> rows{row("a", "1"), row("a", "2")};  // both rows of the old table
  std::vector<std::string_view> views(rows.begin(), rows.end());
  REQUIRE(t->insert_with_history(views, {RowHistory{}, RowHistory{}}).ok());
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(insert_rows(*t, {row("a", "3")}), 1);
}

TEST(concurrent_producers_of_one_key_get_exactly_one_row_in) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  std::atomic<long> duplicates{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; p++)
    producers.emplace_back([&, p] {
      for (int k = 0; k < 200; k++) duplicates += insert_rows(*t, {row("job-" + std::to_string(k), std::to_string(p))});
    });
  for (auto& th : producers) th.join();
  CHECK_EQ(t->info().rows, 200u);
  CHECK_EQ(duplicates.load(), 7 * 200);
}

TEST(relayed_rows_are_deduplicated_and_still_recorded_as_received) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(insert_rows(*t, {row("k", "local")}), 0);
  bool accepted = false;
  REQUIRE(relay1(*t, row("k", "relayed"), 7, 1, false, &accepted).ok());
  CHECK_EQ(t->info().rows, 1u);  // a duplicate: not written
  CHECK_EQ(t->last_relayed_rowid(7), 1u);  // but received: a replay of it is dropped as such
}

// A failed write takes its keys back: the producer's retry must go in, not be dropped as a
// duplicate of a row that was never written.
TEST(an_insert_that_failed_to_write_leaves_no_key_behind) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(insert_rows(*t, {row("small", "x")}), 0);
  const uint64_t size = t->info().file_bytes;
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  ::getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = size + 100;  // the process may not grow the file past this: a big row fails
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  const long failed = insert_rows(*t, {row("big", std::string(1000, 'z'))});
  ::setrlimit(RLIMIT_FSIZE, &old);
  CHECK_EQ(failed, -1);
  CHECK_EQ(t->info().dedup_keys, 1u);
  CHECK_EQ(insert_rows(*t, {row("big", std::string(1000, 'z'))}), 0);  // the retry goes in
  CHECK_EQ(t->info().rows, 2u);
}

// The engine notes a transaction's duplicates on the statement that ends it: prepare() and a
// one-phase commit() tell how many of each table's new rows they dropped (none on rollback).
TEST(a_transaction_tells_how_many_duplicates_its_end_dropped) {
  TempDir dir;
  auto t = dedup_table(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(insert_rows(*t, {row("k1", "first")}), 0);
  {
    Transaction txn(1);
    txn.insert(t, row("k1", "again"));
    txn.insert(t, row("k2", "new"));
    txn.insert(t, row("k2", "twice"));
    CHECK(txn.duplicates().empty());  // nothing is decided before the end
    REQUIRE(txn.prepare("xid-1").ok());
    REQUIRE(txn.duplicates().size() == 1u);
    CHECK(txn.duplicates()[0].table == t.get());
    CHECK_EQ(txn.duplicates()[0].dropped, 2u);
    REQUIRE(txn.commit().ok());
  }
  {
    Transaction txn(2);
    txn.insert(t, row("k2", "again"));
    txn.insert(t, row("k3", "new"));
    REQUIRE(txn.commit().ok());  // one phase
    REQUIRE(txn.duplicates().size() == 1u);
    CHECK_EQ(txn.duplicates()[0].dropped, 1u);
  }
  {
    Transaction txn(3);
    txn.insert(t, row("k4", "new"));
    REQUIRE(txn.commit().ok());
    CHECK(txn.duplicates().empty());
  }
  CHECK_EQ(t->info().rows, 4u);
}
