// TailCache: what it keeps, what it forgets, and that every read it serves is byte-exact
// (against a model of the file); then a table whose backlog outgrows the cache.
#include <random>

#include "check.h"
#include "storage_test_util.h"
#include "../../storage/tail_cache.h"

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

// A backlog a few times the cache: the oldest rows come from pread, the newest from
// memory, and every payload arrives intact; with a compaction (new file) half way, too.
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
      int idx = 0;
      REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
      REQUIRE(idx == 1);
      RowId id = 0;
      std::string payload;
      bool found = false;
      REQUIRE(t->next_visible(&c, 0, &id, &payload, &found).ok());
      REQUIRE(found);
      REQUIRE(payload == rows[i]);
    }
    REQUIRE(c.end().ok());
    CHECK_EQ(t->visible_count(nullptr), 0u);
    const uint64_t reads = global_stats().sys_read.get() - reads_before;
    if (compact_half_way) continue;  // the compacted file starts with an empty cache
    CHECK(reads > 4000u);  // the backlog outgrew the cache...
    CHECK(reads < 6000u);  // ...but its newest rows (~4 MiB) came from memory
  }
}
