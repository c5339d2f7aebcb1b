// The row index's cold blocks (core/row/index.h): runs of plain rows keep no entry per row,
// only where they are in the data file and a bit per row, and read their entries back from the
// file when a position, find() or remove() reaches into them. Checked against a model, with
// the rows in a real data file (FileRowSource), and the memory a plain row costs.
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <map>
#include <random>

#include "check.h"
#include "core/file/data_file.h"
#include "core/file/format.h"
#include "core/file/index_snapshot.h"
#include "core/file/row_source.h"
#include "core/row/index.h"
#include "core/util/stats.h"
#include "storage_test_util.h"

using namespace q4m;
using q4m_test::TempDir;

namespace {

// A data file with rows written as the table writes them (chunks of ROW records, with REMOVE
// and META records in between), and an index of them.
struct FileRows {
  std::shared_ptr<DataFile> file;
  RowIndex index;
  explicit FileRows(const std::string& path) {
    REQUIRE_OK(DataFile::create(path, &file));
    REQUIRE_OK(file->append(fmt::file_header()));
    index.set_source(std::make_shared<FileRowSource>(file));
  }
  static void REQUIRE_OK(const Status& s) {
    if (!s.ok()) std::abort();
  }
  // One chunk: rows with these ids (payloads of `size` bytes), optionally a REMOVE of other ids.
  void commit(const std::vector<RowId>& ids, size_t size, const std::vector<RowId>& removals = {},
              bool in_index = true) {
    std::string out;
    fmt::ChunkBuilder c(&out);
    std::vector<size_t> at;
    for (RowId id : ids) at.push_back(c.add_row(id, 1000 + id, std::string(size, char('a' + id % 26))));
    if (!removals.empty()) c.add_remove(removals.data(), removals.size());
    c.add_meta(fmt::Meta{});
    c.finish();
    const uint64_t base = file->size();
    REQUIRE_OK(file->append(out));
    if (!in_index) return;
    for (size_t i = 0; i < ids.size(); i++) {
      RowEntry e;
      e.id = ids[i];
      e.offset = base + at[i];
      e.length = static_cast<uint32_t>(size);
      e.time_ms = 1000 + ids[i];
      index.append(e);
    }
  }
};

RowId live_from(RowIndex& index, size_t pos) {
  for (; pos < index.end_pos(); pos++)
    if (index.at(pos).state != RowState::kRemoved) return index.at(pos).id;
  return 0;
}

void check_against_model(RowIndex& index, const std::map<RowId, uint32_t>& live, RowId max_id) {
  for (RowId id = 0; id <= max_id + 2; id++) {
    auto it = live.lower_bound(id);
    CHECK_EQ(live_from(index, index.lower_bound(id)), it == live.end() ? 0 : it->first);
    RowEntry* e = index.find(id);
    CHECK_EQ(e != nullptr, live.count(id) == 1);
    if (e) {
      CHECK_EQ(e->id, id);
      CHECK_EQ(e->length, live.at(id));
      CHECK_EQ(e->time_ms, 1000 + id);
    }
  }
  for (size_t pos = 0; pos < index.end_pos(); pos++) CHECK_EQ(index.lower_bound(index.at(pos).id), pos);
  CHECK_EQ(index.live(), static_cast<uint64_t>(live.size()));
}

}  // namespace

// The acceptance test of issue 43: a plain row costs at most 2 bytes of index memory, by the
// index's own account and by what malloc says it handed out.
TEST(plain_rows_cost_at_most_two_bytes) {
  TempDir dir;
  const size_t before = mallinfo2().uordblks;
  {
    FileRows t(dir.path() + "/plain.qdata");
    const RowId n = 2'000'000;
    std::vector<RowId> ids;
    for (RowId id = 1; id <= n; id++) {
      ids.push_back(id);
      if (ids.size() == 500) t.commit(ids, 8), ids.clear();
    }
    t.commit(ids, 8);
    const uint64_t bytes = t.index.memory_bytes();
    const size_t held = mallinfo2().uordblks - before;
    std::printf("  %llu rows: index says %llu bytes (%.3f B/row), malloc %zu bytes (%.3f B/row), %llu cold\n",
                (unsigned long long)n, (unsigned long long)bytes, double(bytes) / n, held, double(held) / n,
                (unsigned long long)t.index.cold_rows());
    CHECK(bytes <= 2 * n);
    CHECK(held <= 2 * n);
    // The account is honest: within a quarter of what malloc gave out (the file object and the
    // source hold a little too).
    CHECK(bytes + bytes / 4 + 65536 >= held);
    CHECK_EQ(t.index.live(), n);
    CHECK_EQ(t.index.end_pos(), size_t(n));
    CHECK(t.index.cold_rows() > n - 4 * RowIndex::kBlockRows);
    // A scan through the whole backlog (a condition that matches only the last row) keeps a few
    // blocks read back behind it, not all of them.
    uint64_t peak = 0;
    for (size_t pos = 0; pos < t.index.end_pos(); pos++) {
      if (pos % 256 == 0) {
        t.index.release_read_back(t.index.at(pos).id);
        peak = std::max(peak, t.index.memory_bytes());
      }
      CHECK(t.index.at(pos).state == RowState::kFree);
    }
    CHECK(peak <= 2 * n + 10 * RowIndex::kBlockRows * 48);
    t.index.fold_now();  // the last few, as the next inserts and removals would
    CHECK(t.index.memory_bytes() <= bytes + 4096);
    // Consuming from the front reads the cold blocks back one at a time.
    for (RowId id = 1; id <= n; id++) {
      const size_t pos = t.index.lower_bound(id);
      if (pos != 0 || t.index.at(0).id != id) {
        CHECK_EQ(pos, 0u);
        CHECK_EQ(t.index.at(0).id, id);
        break;
      }
      CHECK(t.index.remove(id));
      if (id % 100'000 == 0) CHECK(t.index.memory_bytes() <= 2 * (n - id) + 8 * RowIndex::kBlockRows * sizeof(RowEntry));
    }
    CHECK_EQ(t.index.live(), 0u);
  }
}

TEST(cold_blocks_against_a_model) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 6; round++) {
    TempDir dir;
    FileRows t(dir.path() + "/model.qdata");
    std::map<RowId, uint32_t> live;
    RowId id = 1;
    std::vector<RowId> pending_removals;
    for (int chunk = 0; chunk < 120; chunk++) {
      // Rows written but never in the index (a row removed before the index saw it): the
      // cold block must treat them as removed slots.
      if (rng() % 4 == 0) {
        const RowId ghost = ++id;
        t.commit({ghost}, 3, {ghost}, false);
      }
      std::vector<RowId> ids;
      const size_t size = 1 + rng() % 40;
      for (int i = 0; i < 150; i++) {
        id += (round % 2 && rng() % 5 == 0) ? 1 + rng() % 20 : 1;  // gaps (relay, copies)
        ids.push_back(id);
      }
      t.commit(ids, size, pending_removals);
      pending_removals.clear();
      for (RowId r : ids) live[r] = static_cast<uint32_t>(size);
      // Some removals in the middle: they cut no block, they leave tombstones.
      for (int k = 0; k < 20; k++) {
        auto it = live.lower_bound(1 + rng() % id);
        if (it == live.end()) continue;
        CHECK(t.index.remove(it->first));
        pending_removals.push_back(it->first);
        live.erase(it);
      }
    }
    t.index.fold_now();
    CHECK(t.index.cold_rows() > 0);
    const uint64_t folded = t.index.memory_bytes();
    check_against_model(t.index, live, id);  // reads every block back
    CHECK(t.index.memory_bytes() > folded);
    t.index.fold_now();  // folds back without reading (unchanged but for removals)
    CHECK(t.index.memory_bytes() <= folded + 1024);
    // A row with state keeps its block hot; the others fold again.
    const RowId special = std::next(live.begin(), live.size() / 2)->first;
    t.index.find(special)->deliveries = 1;
    for (int k = 0; k < 300; k++) {
      auto it = live.lower_bound(1 + rng() % id);
      if (it == live.end() || it->first == special) continue;
      CHECK(t.index.remove(it->first));
      live.erase(it);
    }
    t.index.fold_now();
    CHECK_EQ(t.index.find(special)->deliveries, 1);
    check_against_model(t.index, live, id);
    // Drain from the front, as consumers do, folding as the index goes.
    while (!live.empty()) {
      CHECK(t.index.remove(live.begin()->first));
      live.erase(live.begin());
      if (live.size() % 997 == 0) t.index.fold_now();
    }
    CHECK_EQ(t.index.live(), 0u);
    CHECK_EQ(t.index.live_bytes(), 0u);
  }
}

// Entries pointing at TXN_ROW records no TXN_END gave ids (made up here; the file cannot give
// them back): their block stays hot.
TEST(rows_the_file_cannot_give_back_stay_hot) {
  TempDir dir;
  FileRows t(dir.path() + "/txn.qdata");
  for (RowId id = 1; id <= 4 * RowIndex::kBlockRows; id += 512) {
    std::vector<RowId> ids;
    for (RowId k = id; k < id + 512; k++) ids.push_back(k);
    t.commit(ids, 5);
  }
  // Entries pointing at TXN_ROW records.
  std::string out;
  fmt::ChunkBuilder c(&out);
  std::vector<size_t> at;
  for (int i = 0; i < 3 * int(RowIndex::kBlockRows); i++) at.push_back(c.add_txn_row(9, 77, "txn"));
  c.finish();
  const uint64_t base = t.file->size();
  FileRows::REQUIRE_OK(t.file->append(out));
  const RowId first_txn = 100'000;
  for (size_t i = 0; i < at.size(); i++) {
    RowEntry e;
    e.id = first_txn + i;
    e.offset = base + at[i];
    e.length = 3;
    e.time_ms = 77;
    t.index.append(e);
  }
  t.commit({500'000}, 5);
  t.index.fold_now();
  const uint64_t cold = t.index.cold_rows();
  CHECK(cold >= 2 * RowIndex::kBlockRows - 1);  // the plain ROW blocks past the front
  CHECK(cold < 4 * RowIndex::kBlockRows);      // none of the TXN_ROW ones
  for (size_t i = 0; i < at.size(); i += 97) {
    const RowEntry* e = t.index.find(first_txn + i);
    REQUIRE(e);
    CHECK_EQ(e->offset, base + at[i]);
    CHECK_EQ(e->time_ms, 77u);
  }
}

namespace {
// The folded table's rows survive a kill -9 (a copy of its file) and a clean reopen (the index
// snapshot), both within `bound` bytes of index, and come back in order, every byte.
void stays_small_after_a_crash_and_a_reopen_and_gives_every_row_back(TempDir& dir, const std::string& path,
                                                                      std::shared_ptr<QueueTable> t,
                                                                      const std::vector<std::string>& rows,
                                                                      uint64_t bound) {
  const uint64_t n = rows.size();
  auto crashed = q4m_test::crash_copy(dir, path, "crashed");
  REQUIRE(crashed);
  CHECK_EQ(crashed->info().rows, n);
  CHECK(crashed->info().memory_bytes <= bound);
  crashed.reset();
  t.reset();
  t = q4m_test::reopen(path);  // from the index snapshot
  REQUIRE(t);
  CHECK_EQ(t->info().rows, n);
  CHECK(t->info().memory_bytes <= bound);
  Consumer c;
  for (const std::string& want : rows) {
    REQUIRE(q4m_test::take(c, t));
    RowId id = 0;
    std::string payload;
    bool found = false;
    Status s = t->next_visible(&c, 0, &id, &payload, &found);
    if (!s.ok() || !found || payload != want) {
      CHECK(s.ok());
      CHECK_EQ(payload, want);
      break;
    }
  }
  REQUIRE(c.end().ok());
  CHECK_EQ(t->info().rows, 0u);
}
}  // namespace

// A table: a deep backlog stays cold in memory after a clean reopen (index snapshot, version 4
// keeps the cold blocks) and after a crash (recovery folds as it reads), and its rows come out
// in order with their bytes, from the front, reading the cold blocks back.
TEST(a_table_keeps_a_deep_backlog_cold_across_reopen_and_crash) {
  q4m_test::SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = q4m_test::create_and_open(path);
  REQUIRE(t);
  const int n = 60000;
  std::vector<std::string> rows;
  for (int i = 0; i < n; i++) rows.push_back("row" + std::to_string(i));
  for (int i = 0; i < n; i += 1000) {
    std::vector<std::string_view> v(rows.begin() + i, rows.begin() + i + 1000);
    REQUIRE(t->insert(v, nullptr).ok());
  }
  // Two blocks at the front and the tail stay hot (~45 B per row there).
  const uint64_t bound = 2 * n + 4 * RowIndex::kBlockRows * 48;
  CHECK(t->info().memory_bytes <= bound);
  CHECK(t->info().memory_bytes > 0);
  CHECK(global_stats().memory_bytes.get() >= t->info().memory_bytes / 2);
  stays_small_after_a_crash_and_a_reopen_and_gives_every_row_back(dir, path, std::move(t), rows, bound);
}

// A cold block whose bytes the file cannot give back any more (the file cut short, or its
// records overwritten) is an error of the access that needed it, naming the file: its rows are
// never made up, and nothing aborts (before, warm() called std::abort()).
TEST(a_cold_block_the_file_cannot_give_back_is_an_error) {
  for (bool cut : {true, false}) {
    TempDir dir;
    const std::string path = dir.path() + "/damaged.qdata";
    FileRows t(path);
    const RowId n = 8 * RowIndex::kBlockRows;
    std::vector<RowId> ids;
    for (RowId id = 1; id <= n; id++) {
      ids.push_back(id);
      if (ids.size() == 512) t.commit(ids, 8), ids.clear();
    }
    t.index.fold_now();
    REQUIRE(t.index.cold_rows() > 4 * RowIndex::kBlockRows);
    const RowId bad = n / 2;  // in a cold block
    const uint64_t at = t.index.find(bad - RowIndex::kBlockRows)->offset;  // reads a block back...
    t.index.fold_now();  // ...and folds it again
    if (cut) {
      REQUIRE(::truncate(path.c_str(), static_cast<off_t>(at)) == 0);
    } else {
      const int fd = ::open(path.c_str(), O_WRONLY);  // in place: the index's DataFile reads this inode
      const std::string junk(64 << 10, '\x55');
      REQUIRE(fd >= 0 && ::pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(at)) == ssize_t(junk.size()));
      ::close(fd);
    }
    CHECK(!t.index.read_failed());
    CHECK(t.index.find(bad) == nullptr);  // not made up
    CHECK(t.index.read_failed());
    Status s = t.index.take_read_error();
    CHECK(s.code() == ErrorCode::kDamaged);
    CHECK(s.message().find(path) != std::string::npos);
    CHECK(s.message().find("ids") != std::string::npos);
    CHECK(!t.index.read_failed());
    // A scan over the block gives removed entries, ids still increasing, and the error.
    RowId prev = 0;
    for (size_t pos = t.index.lower_bound(bad - 10); pos < t.index.end_pos(); pos++) {
      const RowEntry& e = t.index.at(pos);
      CHECK(e.id >= prev);
      prev = e.id;
    }
    CHECK(t.index.read_failed());
    CHECK(t.index.take_read_error().code() == ErrorCode::kDamaged);
    CHECK(t.index.first_live() != nullptr);  // the front is hot and readable
    CHECK(!t.index.remove(bad));
    CHECK(t.index.take_read_error().code() == ErrorCode::kDamaged);
    CHECK(t.index.remove(1));  // the rest of the index works
    CHECK(!t.index.read_failed());
  }
}

// The same through a table: a take that reaches the block, and a scan, get the error (the
// engine makes it an SQL error naming the table: functions/queue_wait.cc, ha_queue::raise).
TEST(a_take_and_a_scan_through_an_unreadable_cold_block_fail_with_its_file) {
  q4m_test::SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = q4m_test::create_and_open(path);
  REQUIRE(t);
  const int n = 12 * int(RowIndex::kBlockRows);
  std::vector<std::string> rows;
  for (int i = 0; i < n; i++) rows.push_back("row" + std::to_string(i));
  for (int i = 0; i < n; i += 1024) {
    std::vector<std::string_view> v(rows.begin() + i, rows.begin() + std::min(n, i + 1024));
    REQUIRE(t->insert(v, nullptr).ok());
  }
  CHECK(t->info().memory_bytes <= 2 * uint64_t(n) + 4 * RowIndex::kBlockRows * 48);  // folded
  const uint64_t size = t->info().file_bytes;
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(size / 2)) == 0);
  // A scan from the middle.
  RowId id = 0;
  std::string payload;
  bool found = false;
  Status s = t->next_row(RowId(n / 2 + 1000), &id, &payload, &found, nullptr);
  CHECK(s.code() == ErrorCode::kDamaged);
  CHECK(s.message().find(path) != std::string::npos);
  // Consuming from the front: the rows before the cut come out, then the take fails.
  Consumer c;
  int taken = 0;
  for (;;) {
    int idx = 0;
    s = c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx);
    if (!s.ok() || idx == 0) break;
    taken++;
  }
  CHECK(s.code() == ErrorCode::kDamaged);
  CHECK(s.message().find(path) != std::string::npos);
  std::printf("  taken %d of %d: %s\n", taken, n, s.message().c_str());
  CHECK(taken >= int(2 * RowIndex::kBlockRows));
  CHECK(taken <= n / 2);  // none past the cut
  // Again: the same error, not a row made up past the cut.
  int idx = 0;
  s = c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx);
  CHECK(s.code() == ErrorCode::kDamaged);
  CHECK_EQ(idx, 0);
}

// Issue 43 with the binary log on: every INSERT commits in two phases, its rows written as
// TXN_ROW records (no id; a checksum covering id 0) and given ids by a TXN_END later. Such
// rows fold as plain ROWs do, read back by their TXN_END, and cost at most 2 bytes too: here
// with transactions whose ends come in another order than their prepares, and one rolled back.
TEST(two_phase_rows_cost_at_most_two_bytes_too) {
  TempDir dir;
  const size_t before = mallinfo2().uordblks;
  {
    FileRows t(dir.path() + "/txn.qdata");
    const RowId n = 1'000'000;
    const size_t per = 500;
    RowId next = 1;
    uint64_t txn = 1;
    std::map<RowId, std::pair<uint64_t, uint64_t>> where;  // id -> offset, time (sampled)
    while (next <= n) {
      // Two transactions prepared, the second committed first; a third rolled back between.
      std::string out;
      fmt::ChunkBuilder c(&out);
      std::vector<size_t> at_a, at_b;
      const uint64_t a = txn++, b = txn++, gone = txn++;
      for (size_t i = 0; i < per; i++) at_a.push_back(c.add_txn_row(a, 2000 + a, "aaaaaaaa"));
      c.add_txn_prepare(a, "xa");
      c.finish();
      fmt::ChunkBuilder c2(&out);
      for (size_t i = 0; i < per; i++) at_b.push_back(c2.add_txn_row(b, 2000 + b, "bbbbbbbb"));
      c2.add_txn_row(gone, 1, "rolled back");
      c2.add_txn_prepare(b, "xb");
      c2.add_txn_prepare(gone, "xg");
      c2.finish();
      fmt::ChunkBuilder c3(&out);
      c3.add_txn_end(b, true, next);
      c3.add_txn_end(gone, false, 0);
      c3.add_txn_end(a, true, next + per);
      c3.finish();
      const uint64_t base = t.file->size();
      FileRows::REQUIRE_OK(t.file->append(out));
      auto add = [&](const std::vector<size_t>& at, uint64_t time) {  // (offsets in `out`)
        for (size_t i = 0; i < at.size(); i++, next++) {
          RowEntry e;
          e.id = next;
          e.offset = base + at[i];
          e.length = 8;
          e.time_ms = time;
          e.txn_row = true;
          t.index.append(e);
          if (next % 997 == 0) where[next] = {e.offset, time};
        }
      };
      add(at_b, 2000 + b);
      add(at_a, 2000 + a);
    }
    const uint64_t bytes = t.index.memory_bytes();
    const size_t held = mallinfo2().uordblks - before;
    std::printf("  %llu two-phase rows: index says %llu bytes (%.3f B/row), malloc %zu bytes (%.3f B/row), %llu cold\n",
                (unsigned long long)n, (unsigned long long)bytes, double(bytes) / n, held, double(held) / n,
                (unsigned long long)t.index.cold_rows());
    CHECK(bytes <= 2 * n);
    CHECK(held <= 2 * n + 200'000);  // (`where`: ~1,000 sampled rows)
    CHECK(t.index.cold_rows() > n - 4 * RowIndex::kBlockRows);
    // Read back: each row with its own offset and time, marked as a TXN_ROW's.
    for (const auto& [id, w] : where) {
      const RowEntry* e = t.index.find(id);
      REQUIRE(e);
      CHECK_EQ(e->offset, w.first);
      CHECK_EQ(e->time_ms, w.second);
      CHECK(e->txn_row);
      t.index.release_read_back(id);
    }
    CHECK_EQ(t.index.live(), n);
    for (size_t pos = 1; pos < t.index.end_pos(); pos += 4099) CHECK(t.index.at(pos).id > t.index.at(pos - 1).id);
    CHECK(!t.index.read_failed());
  }
}

// The same through a table, as the engine commits with the binary log on (prepare_part, then
// end_part): the backlog folds, stays folded across a clean reopen (index snapshot) and a crash
// (recovery), and its rows come out in order with their bytes, checked by their TXN_ROW's
// checksum (a damaged one is still caught: storage_read_checksum_test).
TEST(a_table_committing_in_two_phases_keeps_its_backlog_cold) {
  q4m_test::SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = q4m_test::create_and_open(path);
  REQUIRE(t);
  const int n = 60000;
  std::vector<std::string> rows;
  for (int i = 0; i < n; i++) rows.push_back("row" + std::to_string(i));
  Holder txn(7);
  for (int i = 0; i < n;) {
    // One large transaction first: its blocks' TXN_END lies ~1 MB past their rows (kFarEnd).
    const int size = i == 0 ? 30000 : 1000;
    std::vector<std::string_view> v(rows.begin() + i, rows.begin() + i + size);
    i += size;
    uint64_t part = 0;
    REQUIRE(t->prepare_part(&txn, v, "xid", &part).ok());
    REQUIRE(t->end_part(part, true).ok());
  }
  const uint64_t bound = 2 * n + 4 * RowIndex::kBlockRows * 48;
  std::printf("  %d rows committed in two phases: memory_bytes %llu (bound %llu)\n", n,
              (unsigned long long)t->info().memory_bytes, (unsigned long long)bound);
  CHECK(t->info().memory_bytes <= bound);
  stays_small_after_a_crash_and_a_reopen_and_gives_every_row_back(dir, path, std::move(t), rows, bound);
}

namespace {
// Bytes this process has read from files so far (pread included, page cache or not).
uint64_t bytes_read() {
  FILE* f = std::fopen("/proc/self/io", "r");
  if (!f) return 0;
  char line[128];
  unsigned long long n = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "rchar: %llu", &n) == 1) break;
  std::fclose(f);
  return n;
}
}  // namespace

// Folding a block inside a large committed transaction must not walk every record up to its
// far TXN_END: the commit (Table::publish_end) and recovery tell the index where that record
// ends, and a fold reads its block's rows and that one record. Before, each of the ~36 blocks
// of this 9 MB transaction read on to its end (a reopen of 10M rows inserted 100,000 per
// transaction with the binary log on took 34 s instead of 1.9 s).
TEST(folding_inside_a_large_transaction_reads_its_block_not_the_transaction) {
  q4m_test::SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = q4m_test::create_and_open(path);
  REQUIRE(t);
  const int n = 150000;
  std::vector<std::string> rows;
  for (int i = 0; i < n; i++) rows.push_back("row " + std::to_string(i) + std::string(32, 'x'));
  std::vector<std::string_view> v(rows.begin(), rows.end());
  Holder txn(7);
  uint64_t part = 0;
  REQUIRE(t->prepare_part(&txn, v, "xid", &part).ok());
  const uint64_t file_bytes = q4m_test::read_file_bytes(path).size();
  const uint64_t at_commit = bytes_read();
  REQUIRE(t->end_part(part, true).ok());
  const uint64_t commit_read = bytes_read() - at_commit;
  const uint64_t cold = t->info().memory_bytes;
  // Recovery (a crash): the file once, and the folds.
  const uint64_t at_recovery = bytes_read();
  auto crashed = q4m_test::crash_copy(dir, path, "crashed");
  const uint64_t recovery_read = bytes_read() - at_recovery;
  REQUIRE(crashed);
  std::printf("  one %d-row transaction, %llu-byte file: the commit's folds read %llu bytes, recovery %llu "
              "(with the copy's read and write); memory_bytes %llu / %llu\n",
              n, (unsigned long long)file_bytes, (unsigned long long)commit_read, (unsigned long long)recovery_read,
              (unsigned long long)cold, (unsigned long long)crashed->info().memory_bytes);
  CHECK_EQ(crashed->info().rows, uint64_t(n));
  CHECK(cold <= 2 * n + 4 * RowIndex::kBlockRows * 48);  // it folded
  CHECK(crashed->info().memory_bytes <= 2 * n + 4 * RowIndex::kBlockRows * 48);
  // Each fold reads its block (~270 KB here, and 64 KB past it) and one TXN_END: about the
  // file once more in all (2.8 and 3.6 times the file with the commit's and the copy's other
  // reads); walking to the TXN_END read 20 times the file (the ratio grows with the size).
  CHECK(commit_read <= 5 * file_bytes);
  CHECK(recovery_read <= 6 * file_bytes);  // crash_copy reads the file once, recovery once more
  crashed.reset();
  // A clean close leaves the cold blocks as they are in the index snapshot (it used to read
  // every block back to look for rows to keep: a snapshot of 28 B a row, all hot, that the
  // next open folded again, walking to the TXN_END: 34 s for 10M rows).
  t.reset();
  TableRegistry::instance().close_all();
  const uint64_t snapshot_bytes = q4m_test::read_file_bytes(index_snapshot_path(path)).size();
  const uint64_t at_reopen = bytes_read();
  t = q4m_test::reopen(path);
  const uint64_t reopen_read = bytes_read() - at_reopen - snapshot_bytes;
  REQUIRE(t);
  std::printf("  clean reopen: index snapshot %llu bytes, the open read %llu bytes, memory_bytes %llu\n",
              (unsigned long long)snapshot_bytes, (unsigned long long)reopen_read,
              (unsigned long long)t->info().memory_bytes);
  CHECK_EQ(t->info().rows, uint64_t(n));
  CHECK(snapshot_bytes <= 2 * n + 4 * RowIndex::kBlockRows * 28);  // a few hot blocks, the rest cold
  CHECK(reopen_read <= file_bytes / 4);  // (206 MB before)
  Consumer c;  // the first row comes back with its bytes
  int idx = 0;
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  RowId id = 0;
  std::string payload;
  bool found = false;
  REQUIRE(t->next_visible(&c, 0, &id, &payload, &found).ok() && found);
  CHECK_EQ(payload, rows[0]);
  REQUIRE(c.end().ok());
}
