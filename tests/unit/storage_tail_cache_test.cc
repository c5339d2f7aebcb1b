// TailCache: what it keeps, what it forgets, and that every read it serves is byte-exact
// (against a model of the file); the read-ahead window for older rows; then a table whose
// backlog outgrows the cache.
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "check.h"
#include "storage_test_util.h"
#include "core/table/read_ahead_window.h"
#include "core/table/tail_cache.h"

using namespace q4m;
using namespace q4m_test;

namespace {

std::string pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>('a' + (seed * 31 + i * 7) % 26);
  return s;
}

}  // namespace

TEST(reads_only_what_it_holds) {
  TailCache c(64u << 10);
  c.reset(1, 100);
  std::string out;
  CHECK(!c.read(1, 100, 1, &out));
  c.append(1, 100, "hello world");
  CHECK(c.read(1, 100, 5, &out));
  CHECK_EQ(out, "hello");
  CHECK(c.read(1, 106, 5, &out));
  CHECK_EQ(out, "world");
  CHECK(c.read(1, 111, 0, &out));    // empty row at the very end
  CHECK(!c.read(1, 99, 2, &out));    // starts before the cache
  CHECK(!c.read(1, 106, 6, &out));   // runs past the end
  CHECK(!c.read(2, 100, 5, &out));   // another file (e.g. after compaction)
  c.append(1, 500, "x");             // not contiguous: starts over at 500
  CHECK(!c.read(1, 100, 5, &out));
  CHECK(c.read(1, 500, 1, &out));
  c.append(2, 501, "y");             // another file: starts over
  CHECK(!c.read(1, 500, 1, &out));
  CHECK(c.read(2, 501, 1, &out));
}

TEST(matches_the_file_across_blocks_and_eviction) {
  const size_t capacity = 5 * TailCache::kBlockSize;
  TailCache c(capacity);
  std::string file(12345, 'h');  // everything "written" so far, by offset
  c.reset(7, file.size());
  std::mt19937_64 rng(1);
  std::string out;
  for (int i = 0; i < 3000; i++) {
    size_t n = rng() % 5 == 0 ? rng() % (3 * TailCache::kBlockSize) : rng() % 300;
    std::string bytes = pattern(n, rng());
    c.append(7, file.size(), bytes);
    file += bytes;
    CHECK_EQ(c.end(), file.size());
    CHECK(c.end() - c.begin() <= capacity + TailCache::kBlockSize);
    CHECK(c.end() - c.begin() >= std::min<uint64_t>(capacity, file.size() - 12345));
    for (int k = 0; k < 5; k++) {
      uint64_t off = c.begin() + rng() % (c.end() - c.begin() + 1);
      size_t len = static_cast<size_t>(rng() % (c.end() - off + 1));
      if (len > TailCache::kMaxCachedRead) len = TailCache::kMaxCachedRead;
      REQUIRE(c.read(7, off, len, &out));
      CHECK(out == file.substr(off, len));
    }
    if (c.begin() > 0) CHECK(!c.read(7, c.begin() - 1, 1, &out));
  }
}

TEST(an_append_bigger_than_the_cache_is_not_kept) {
  TailCache c(2 * TailCache::kBlockSize);
  c.reset(1, 0);
  c.append(1, 0, "abc");
  c.append(1, 3, std::string(3 * TailCache::kBlockSize, 'z'));
  std::string out;
  CHECK(!c.read(1, 0, 3, &out));
  CHECK(!c.read(1, 3, 10, &out));
  CHECK_EQ(c.begin(), c.end());
  c.append(1, c.end(), "next");
  CHECK(c.read(1, c.end() - 4, 4, &out));
  CHECK_EQ(out, "next");
}

TEST(long_rows_are_left_to_pread) {
  TailCache c(1u << 20);
  c.reset(1, 0);
  c.append(1, 0, std::string(TailCache::kMaxCachedRead + 1, 'r'));
  std::string out;
  CHECK(!c.read(1, 0, TailCache::kMaxCachedRead + 1, &out));
  CHECK(c.read(1, 0, TailCache::kMaxCachedRead, &out));
}

TEST(read_ahead_window_serves_only_its_bytes_of_its_file) {
  ReadAheadWindow w;
  std::string out;
  CHECK(!w.read(1, 0, 0, &out));  // empty
  w.fill(3, 1000, "abcdefgh");
  CHECK(w.read(3, 1000, 3, &out));
  CHECK_EQ(out, "abc");
  CHECK(w.read(3, 1005, 3, &out));
  CHECK_EQ(out, "fgh");
  CHECK(!w.read(3, 999, 2, &out));   // starts before
  CHECK(!w.read(3, 1006, 3, &out));  // runs past the end
  CHECK(!w.read(4, 1000, 3, &out));  // another file object (compaction, TRUNCATE)
  w.fill(3, 2000, "ijkl");           // a second block: both are kept
  CHECK(w.read(3, 1000, 3, &out));
  CHECK(w.read(3, 2001, 2, &out));
  CHECK_EQ(out, "jk");
  w.fill(3, 3000, "mnop");           // a third evicts the one that starts lowest
  CHECK(!w.read(3, 1000, 3, &out));
  CHECK(w.read(3, 2000, 4, &out));
  CHECK(w.read(3, 3000, 4, &out));
  w.fill(3, 3000, "MNOP");           // the same block again replaces itself
  CHECK(w.read(3, 2000, 4, &out));
  CHECK(w.read(3, 3000, 4, &out));
  CHECK_EQ(out, "MNOP");
  w.fill(4, 0, "xyz");               // a new file's block evicts the old file's first
  CHECK(w.read(4, 0, 3, &out));
}

TEST(read_ahead_reads_aligned_published_blocks_and_skips_long_rows) {
  const uint64_t k = ReadAheadWindow::kSize;
  ReadAheadWindow::Plan p;
  REQUIRE(ReadAheadWindow::plan(100, 50, 1u << 30, &p));  // the aligned block around the row
  CHECK_EQ(p.begin, 0u);
  CHECK_EQ(p.end, k);
  REQUIRE(ReadAheadWindow::plan(k + 7, 50, 1u << 30, &p));  // the next block
  CHECK_EQ(p.begin, k);
  CHECK_EQ(p.end, 2 * k);
  REQUIRE(ReadAheadWindow::plan(100, 50, 5000, &p));  // cut where the tail cache starts
  CHECK_EQ(p.end, 5000u);
  REQUIRE(ReadAheadWindow::plan(k - 10, 50, 1u << 30, &p));  // a row across the block's end
  CHECK_EQ(p.begin, 0u);
  CHECK_EQ(p.end, k + 40);
  CHECK(!ReadAheadWindow::plan(100, 50, 120, &p));  // the row is not all published
  CHECK(!ReadAheadWindow::plan(0, 50, 50, &p));     // nothing but the row: read it alone
  CHECK(!ReadAheadWindow::plan(100, TailCache::kMaxCachedRead + 1, 1u << 30, &p));  // a long row
}

// A backlog a few times the cache: the oldest rows come from read-ahead windows, the
// newest from memory, and every payload arrives intact; with a compaction (new file)
// half way, too.
TEST(table_backlog_larger_than_the_cache) {
  SyncModeScope sync(SyncMode::kNone);
  for (bool compact_half_way : {false, true}) {
    TempDir dir;
    auto t = create_and_open(dir.file("t"));
    REQUIRE(t);
    std::vector<std::string> rows;
    for (int i = 0; i < 8000; i++) rows.push_back(pattern(1000 + i % 700, i));  // ~10 MB
    for (int i = 0; i < 8000; i += 100) {
      std::vector<std::string_view> v(rows.begin() + i, rows.begin() + i + 100);
      REQUIRE(t->insert(v, nullptr).ok());
    }
    const uint64_t reads_before = global_stats().sys_read.get();
    Consumer c;
    for (int i = 0; i < 8000; i++) {
      if (compact_half_way && i == 4000) REQUIRE(t->compact().ok());
      REQUIRE(q4m_test::take(c, t));
      RowId id = 0;
      std::string payload;
      bool found = false;
      REQUIRE(t->next_visible(&c, 0, &id, &payload, &found).ok());
      REQUIRE(found);
      REQUIRE(payload == rows[i]);
    }
    REQUIRE(c.end().ok());
    CHECK_EQ(t->visible_count(nullptr), 0u);
    // The ~6.5 MB older than the cache came from about 26 read-ahead blocks of 256 KiB,
    // not from one pread per row (about 3,000: it was so before read-ahead), and the
    // compaction copied its 4,000 rows with a pread per MiB, not per row.
    const uint64_t reads = global_stats().sys_read.get() - reads_before;
    CHECK(reads > 0u);  // the backlog outgrew the cache
    CHECK(reads < 100u);
  }
}

// Four consumers share the read-ahead blocks of a deep backlog while compactions replace
// the file under them: every row arrives exactly once and byte-exact.
TEST(concurrent_consumers_share_read_ahead_blocks) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  const int kRows = 12000;  // ~10 MB: most of it older than the tail cache
  auto row = [](int i) { return std::to_string(i) + ":" + pattern(300 + i % 1300, i); };
  for (int i = 0; i < kRows; i += 200) {
    std::vector<std::string> batch;
    for (int k = i; k < i + 200; k++) batch.push_back(row(k));
    std::vector<std::string_view> v(batch.begin(), batch.end());
    REQUIRE(t->insert(v, nullptr).ok());
  }
  std::vector<std::atomic<int>> seen(kRows);
  std::atomic<int> bad{0}, taken{0};
  std::vector<std::thread> consumers;
  for (int n = 0; n < 4; n++) {
    consumers.emplace_back([&] {
      Consumer c;
      for (;;) {
        int idx = 0;
        if (!c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok() || idx != 1) break;
        RowId id = 0;
        std::string payload;
        bool found = false;
        if (!t->next_visible(&c, 0, &id, &payload, &found).ok() || !found) {
          bad++;
          break;
        }
        const int i = std::atoi(payload.c_str());
        if (i < 0 || i >= kRows || payload != row(i)) {
          bad++;
          continue;
        }
        seen[i]++;
        if (taken.fetch_add(1) % 3000 == 1500) t->compact();  // a new file mid-way, several times
      }
      c.end();
    });
  }
  for (auto& th : consumers) th.join();
  CHECK_EQ(bad.load(), 0);
  int missing = 0, twice = 0;
  for (auto& n : seen) missing += n.load() == 0, twice += n.load() > 1;
  CHECK_EQ(missing, 0);
  CHECK_EQ(twice, 0);
  CHECK_EQ(t->visible_count(nullptr), 0u);
}
