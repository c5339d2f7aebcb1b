// A byte damaged on disk under an open table, in a row older than the tail cache: every read
// of that row fails with an error naming the file and the offset, instead of handing the
// damaged bytes out; the other rows stay readable, the row stays in the table (set aside as a
// dead row, so takes skip it) and is not removed by its reader's next wait; compaction keeps it
// damaged instead of checksumming the damage as good; rows of older-format files are checked
// too (docs/file-format.md "Row checksums", docs/recovery.md "Damaged rows").
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "check.h"
#include "prefix_filter.h"
#include "storage_test_util.h"
#include "core/file/format.h"
#include "core/util/crc32c.h"

using namespace q4m;
using namespace q4m_test;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Flips one bit of byte `at` of `path` in place (the table keeps its descriptor open).
void flip_byte(const std::string& path, uint64_t at) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  std::fputc(c ^ 0x10, f);
  std::fclose(f);
}

// The file offset of `payload` (unique in the file), or 0.
uint64_t offset_of(const std::string& path, const std::string& payload) {
  const std::string bytes = read_file(path);
  const size_t at = bytes.find(payload);
  return at == std::string::npos || bytes.find(payload, at + 1) != std::string::npos ? 0 : at;
}

// Row payloads that share the prefix "job " (for filters) and differ after it.
std::string job(const std::string& name, size_t length = 64) {
  std::string s = "job " + name + " ";
  while (s.size() < length) s += static_cast<char>('a' + s.size() % 26);
  return s;
}

bool mentions(const Status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

// A table with rows A, B, C, reopened (so every row is older than the tail cache), then a
// byte in the middle of B's payload flipped on disk. *b_offset: where B's payload starts.
std::shared_ptr<QueueTable> table_with_damaged_b(const std::string& path, const std::vector<std::string>& rows,
                                                 std::vector<RowId>* ids, uint64_t* b_offset) {
  auto t = create_and_open(path);
  for (const std::string& r : rows) {
    RowId id = 0;
    if (!t || !insert1(*t, r, &id).ok()) return nullptr;
    ids->push_back(id);
  }
  t = reopen(path);
  *b_offset = offset_of(path, rows[1]);
  if (!t || *b_offset == 0) return nullptr;
  flip_byte(path, *b_offset + rows[1].size() / 2);
  return t;
}

}  // namespace

// Short rows go through the read-ahead window (one block holds all three), a long one is
// read alone: both paths check what they read.
TEST(a_damaged_row_fails_every_read_naming_file_and_offset) {
  for (size_t b_length : {size_t(64), size_t(100) << 10}) {
    TempDir dir;
    const std::string path = dir.file("q");
    const std::vector<std::string> rows{job("A"), job("B", b_length), job("C")};
    std::vector<RowId> ids;
    uint64_t b_at = 0;
    auto t = table_with_damaged_b(path, rows, &ids, &b_at);
    REQUIRE(t);
    std::string payload;
    bool found = false;
    Status s = t->read_row(ids[1], &payload, &found);
    CHECK(!s.ok());
    CHECK(mentions(s, path));
    CHECK(mentions(s, "offset " + std::to_string(b_at)));
    CHECK(mentions(s, "checksum"));
    // The rows around it read fine, before and after.
    CHECK(t->read_row(ids[0], &payload, &found).ok() && found && payload == rows[0]);
    CHECK(t->read_row(ids[2], &payload, &found).ok() && found && payload == rows[2]);
    // A scan: A, then the error at B, then C after B.
    RowId id = 0;
    CHECK(t->next_visible(nullptr, 0, &id, &payload, &found).ok() && found && id == ids[0]);
    s = t->next_visible(nullptr, ids[0], &id, &payload, &found);
    CHECK(!s.ok() && mentions(s, path) && mentions(s, "offset " + std::to_string(b_at)));
    CHECK(t->next_visible(nullptr, ids[1], &id, &payload, &found).ok() && found && id == ids[2] &&
          payload == rows[2]);
    // A copying ALTER's scan fails at B too.
    RowHistory history;
    s = t->next_row(ids[0], &id, &payload, &found, &history);
    CHECK(!s.ok() && mentions(s, path));
    CHECK(t->read_row(ids[1], &payload, &found).code() == s.code());  // fails again: not cached as good
    CHECK_EQ(t->info().rows, 3u);
  }
}

// queue_wait hands B out (it reads no payload), the owner's read fails, and the row is set
// aside: the owner's next wait does not remove it, it gets C instead, and B is still there
// (a dead row) after the wait and after a clean restart.
TEST(the_owner_of_a_damaged_row_gets_the_error_and_does_not_remove_it) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  Consumer c(1);
  std::string payload;
  bool found = false;
  RowId id = 0;
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[0]);
  CHECK(t->next_visible(&c, 0, &id, &payload, &found).ok() && found && payload == rows[0]);
  REQUIRE(take(c, t));  // ends A
  CHECK_EQ(c.owned_rowid(), ids[1]);
  Status s = t->next_visible(&c, 0, &id, &payload, &found);
  CHECK(!s.ok() && mentions(s, path) && mentions(s, "offset " + std::to_string(b_at)));
  REQUIRE(take(c, t));  // must not remove B
  CHECK_EQ(c.owned_rowid(), ids[2]);
  CHECK(t->next_visible(&c, 0, &id, &payload, &found).ok() && found && payload == rows[2]);
  CHECK(c.end().ok());
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().dead_rows, 1u);  // set aside: no take hands it out again
  CHECK(!take(c, t));
  // After a restart it is an ordinary queued row again (the set-aside is in memory only: a
  // passing read error heals), and its first read sets it aside again.
  t = reopen(path);
  REQUIRE(t);
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().dead_rows, 0u);
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[1]);
  CHECK(!t->next_visible(&c, 0, &id, &payload, &found).ok());
  CHECK_EQ(t->info().dead_rows, 1u);
  CHECK(c.end().ok());
  CHECK_EQ(t->info().rows, 1u);
}

// A batch (queue_wait_batch) with a damaged row: the statement that reads the batch fails at
// it, so its other rows were not returned either. The next wait removes none of them: the
// damaged row stays set aside and the others go back to the queue (handed out again, never lost).
TEST(a_batch_with_a_damaged_row_gives_its_other_rows_back) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  Consumer c(1);
  size_t taken = 0;
  REQUIRE(c.wait_batch({t, nullptr}, 3, std::chrono::milliseconds(0), &taken).ok() && taken == 3);
  std::string payload;
  bool found = false;
  RowId id = 0;
  CHECK(t->next_visible(&c, 0, &id, &payload, &found).ok() && id == ids[0]);
  CHECK(!t->next_visible(&c, ids[0], &id, &payload, &found).ok());  // the statement fails at B
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[0]);  // A again: given back, not removed
  CHECK_EQ(c.owned_delivery_count(), 2u);
  CHECK_EQ(t->info().rows, 3u);
  CHECK_EQ(t->info().dead_rows, 1u);
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[2]);
  CHECK(c.end().ok());
  CHECK_EQ(t->info().rows, 1u);
}

// A filter reads every candidate's payload: B's damaged bytes must not be evaluated (the
// flipped byte is after the prefix, so the damaged payload would still match).
TEST(a_filtered_take_skips_a_damaged_row) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  Consumer a(1), b(2);
  REQUIRE(take(a, t));  // holds A
  auto filter = std::make_shared<PrefixFilter>("job ");
  int idx = 0;
  REQUIRE(b.wait({{t, filter}}, std::chrono::milliseconds(0), &idx).ok() && idx == 1);
  CHECK_EQ(b.owned_rowid(), ids[2]);
  CHECK_EQ(t->info().rows, 3u);
  CHECK_EQ(t->info().dead_rows, 1u);
}

// Compaction copies B with the checksum it was written with, so the new file does not pass
// the damage off as good: B still fails its reads after the compaction (and after a full
// recovery of the compacted file), and nothing is lost.
TEST(compaction_keeps_a_damaged_row_damaged) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  REQUIRE(t->compact().ok());
  std::string payload;
  bool found = false;
  for (int pass = 0; pass < 2; pass++) {
    CHECK_EQ(t->info().rows, 3u);
    CHECK(t->read_row(ids[0], &payload, &found).ok() && payload == rows[0]);
    CHECK(t->read_row(ids[2], &payload, &found).ok() && payload == rows[2]);
    Status s = t->read_row(ids[1], &payload, &found);
    CHECK(!s.ok() && mentions(s, path) && mentions(s, "checksum"));
    // Then the same after a full recovery of the compacted file (no index snapshot).
    TableRegistry::instance().close_all();
    std::remove((path + ".idx").c_str());
    t = reopen(path);
    REQUIRE(t);
  }
}

// A row coming back to the queue is offered to the waiters; a filtered waiter needs its
// payload, read from disk under the table's lock: the damaged row is set aside instead of
// being evaluated or handed out.
TEST(a_damaged_row_coming_back_is_not_offered_to_a_filtered_waiter) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::string a_row = job("A");
  auto t = table_with(path, {a_row.c_str()});
  REQUIRE(t);
  t = reopen(path);
  REQUIRE(t);
  Consumer x(1), y(2);
  REQUIRE(take(x, t));  // reads nothing
  flip_byte(path, offset_of(path, a_row) + 10);
  Status waited;
  int idx = -1;
  std::thread th([&] { waited = y.wait({{t, std::make_shared<PrefixFilter>("job ")}}, std::chrono::seconds(60), &idx); });
  wait_for_waiters(*t);
  REQUIRE(x.abort().ok());  // A back to the queue: offered to y
  CHECK_EQ(t->info().dead_rows, 1u);
  y.interrupt();
  th.join();
  CHECK(waited.code() == ErrorCode::kInterrupted);
  CHECK(!y.owner_mode());
  CHECK_EQ(t->info().rows, 1u);
}

// MESSAGE_GROUP_COLUMN reads every row when a statement first opens the table: a damaged row
// is in no group (its key is unknown), set aside, and holds up nothing.
TEST(a_damaged_row_read_for_its_message_group_is_set_aside) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{key_label_row("g", "first"), key_label_row("g", "damaged"),
                                      key_label_row("g", "third")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  set_option(*t, &TableOptions::message_group, key_label_column("grp"));
  CHECK_EQ(t->info().dead_rows, 1u);
  Consumer c(1);
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[0]);
  REQUIRE(take(c, t));  // ends the first: the third may go, the damaged one is out of line
  CHECK_EQ(c.owned_rowid(), ids[2]);
  CHECK(c.end().ok());
}

// queue_take_dead() lends the damaged row out; its taker keeps it when the read fails, and
// end() discards it: the one way to get rid of it short of TRUNCATE.
TEST(a_damaged_row_taken_as_dead_is_discarded_by_its_end) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  std::string payload;
  bool found = false;
  CHECK(!t->read_row(ids[1], &payload, &found).ok());  // set aside
  Consumer c(1);
  bool taken = false;
  REQUIRE(c.take_dead(t, &taken).ok() && taken);
  CHECK_EQ(c.owned_rowid(), ids[1]);
  RowId id = 0;
  CHECK(!t->next_visible(&c, 0, &id, &payload, &found).ok());
  CHECK(c.owner_mode());
  REQUIRE(c.end().ok());
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(t->info().dead_rows, 0u);
  CHECK(!t->read_row(ids[1], &payload, &found).ok() || !found);
  CHECK(!found);
}

namespace {

// A version-4 data file (the format before row checksums) holding `rows`, ids from 1.
std::string version_4_file(const std::vector<std::string>& rows) {
  std::string out(fmt::kFileMagic, sizeof(fmt::kFileMagic));
  fmt::put_u32(&out, 4);
  fmt::put_u32(&out, crc32c(out));
  std::string body;
  RowId id = 1;
  for (const std::string& r : rows) {
    body.push_back(1);  // ROW, no checksum
    fmt::put_u64(&body, id++);
    fmt::put_u64(&body, 1700000000000ull);
    fmt::put_u32(&body, static_cast<uint32_t>(r.size()));
    body += r;
  }
  std::string header;
  fmt::put_u32(&header, fmt::kChunkMagic);
  fmt::put_u32(&header, static_cast<uint32_t>(body.size()));
  fmt::put_u32(&header, crc32c(body));
  fmt::put_u32(&header, crc32c(header));
  return out + header + body;
}

}  // namespace

// Rows of a file written before row checksums have none on disk: the checksums recovery
// computes from their verified chunks at open check them, across a clean restart (index
// snapshot) and after compaction rewrote them with checksums of their own.
TEST(rows_of_an_older_format_file_are_checked_too) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  write_file(path, version_4_file(rows));
  Status opened;
  auto t = reopen(path, &opened);
  REQUIRE(t);
  const uint64_t b_at = offset_of(path, rows[1]);
  REQUIRE(b_at != 0);
  flip_byte(path, b_at + 5);
  std::string payload;
  bool found = false;
  for (const char* after : {"open", "clean restart", "compaction"}) {
    if (std::string(after) == "clean restart") {
      const uint64_t recoveries = global_stats().recoveries.get();
      t = reopen(path);
      CHECK_EQ(global_stats().recoveries.get(), recoveries);  // the index snapshot carried the checksums
    }
    if (std::string(after) == "compaction") REQUIRE(t->compact().ok());
    REQUIRE(t);
    Status s = t->read_row(2, &payload, &found);
    CHECK(!s.ok() && mentions(s, path) && mentions(s, "checksum"));
    if (s.ok()) std::fprintf(stderr, "  damaged row read after %s\n", after);
    CHECK(t->read_row(1, &payload, &found).ok() && payload == rows[0]);
    CHECK(t->read_row(3, &payload, &found).ok() && payload == rows[2]);
    CHECK_EQ(t->info().rows, 3u);
  }
}

// An older file goes on working: new rows (with checksums) follow its rows (without), and a
// full recovery (no index snapshot), a clean restart and compaction all read both kinds.
TEST(an_older_format_file_takes_new_rows_and_reads_both_kinds) {
  TempDir dir;
  const std::string path = dir.file("q");
  write_file(path, version_4_file({job("A"), job("B")}));
  auto t = reopen(path);
  REQUIRE(t);
  RowId d = 0;
  REQUIRE(insert1(*t, job("D"), &d).ok());
  CHECK_EQ(d, 3u);
  const std::vector<std::string> want{job("A"), job("B"), job("D")};
  for (const char* how : {"crash", "clean restart", "compaction", "crash after compaction"}) {
    const std::string h = how;
    if (h == "compaction") {
      REQUIRE(t->compact().ok());
    } else {
      TableRegistry::instance().close_all();
      if (h != "clean restart") std::remove((path + ".idx").c_str());  // a full recovery
      t = reopen(path);
    }
    REQUIRE(t);
    const auto rows = scan(*t);
    REQUIRE(rows.size() == 3);
    for (size_t i = 0; i < 3; i++) CHECK(rows[i].second == want[i]);
    if (rows[0].second != want[0]) std::fprintf(stderr, "  after %s\n", how);
  }
  CHECK_EQ(fmt::get_u32(read_file(path).data() + 8), fmt::kFormatVersion);
}

// A damaged row is dead for its own reason (the DeadLetters policy knows it): no
// MAX_DELIVERIES brings it back to the queue, its queue_take_dead() taker's abort leaves it
// dead, and it is not counted as dead-lettered (damaged_reads counts the reads that found it).
TEST(a_damaged_row_stays_dead_whatever_the_limit_and_is_not_counted_as_dead_lettered) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  uint64_t b_at = 0;
  auto t = table_with_damaged_b(path, rows, &ids, &b_at);
  REQUIRE(t);
  std::string payload;
  bool found = false;
  CHECK(!t->read_row(ids[1], &payload, &found).ok());  // set aside
  CHECK_EQ(t->info().dead_rows, 1u);
  for (uint32_t limit : {5u, 0u}) {  // (a new limit sorts the dead rows again)
    set_option(*t, &TableOptions::max_deliveries, limit);
    CHECK_EQ(t->info().dead_rows, 1u);
  }
  Consumer c(1);
  bool taken = false;
  REQUIRE(c.take_dead(t, &taken).ok() && taken);
  CHECK_EQ(c.owned_rowid(), ids[1]);
  REQUIRE(c.abort().ok());
  CHECK_EQ(t->info().dead_rows, 1u);  // back dead, not queued
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[0]);
  REQUIRE(take(c, t));
  CHECK_EQ(c.owned_rowid(), ids[2]);
  REQUIRE(c.end().ok());
  CHECK(!take(c, t));
  const TableStats s = t->info();
  CHECK_EQ(s.rows, 1u);
  CHECK_EQ(s.rows_dead_lettered, 0u);
  CHECK_EQ(s.damaged_reads, 1u);
}

// queue_redrive_dead() copies dead rows: a damaged one cannot be. Met for the first time, it
// fails the redrive naming it (nothing of that slice is written) and is set aside as damaged;
// the next redrive leaves it and moves the others; queue_purge_dead() removes it.
TEST(redrive_leaves_a_damaged_dead_row_and_purge_removes_it) {
  TempDir dir;
  const std::string path = dir.file("q");
  const std::vector<std::string> rows{job("A"), job("B"), job("C")};
  std::vector<RowId> ids;
  {
    auto t = create_and_open(path);
    REQUIRE(t);
    for (const std::string& r : rows) {
      RowId id = 0;
      REQUIRE(insert1(*t, r, &id).ok());
      ids.push_back(id);
    }
    set_option(*t, &TableOptions::max_deliveries, 1);
    for (size_t i = 0; i < rows.size(); i++) {
      Consumer c(1);
      REQUIRE(take(c, t) && c.abort().ok());
    }
    REQUIRE(t->info().dead_rows == 3u);
  }
  auto t = reopen(path);  // nothing cached: the rows are read from the file
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 1);
  REQUIRE(t->info().dead_rows == 3u);
  const uint64_t b_at = offset_of(path, rows[1]);
  REQUIRE(b_at != 0);
  flip_byte(path, b_at + 10);
  size_t moved = 0;
  Status s = t->redrive_dead(10, &moved);
  CHECK(s.code() == ErrorCode::kDamaged && mentions(s, path) && mentions(s, "offset " + std::to_string(b_at)));
  CHECK_EQ(moved, 0u);
  CHECK_EQ(t->info().rows, 3u);
  CHECK_EQ(t->info().dead_rows, 3u);
  REQUIRE(t->redrive_dead(10, &moved).ok());
  CHECK_EQ(moved, 2u);
  CHECK_EQ(t->info().rows, 3u);
  CHECK_EQ(t->info().dead_rows, 1u);
  size_t purged = 0;
  REQUIRE(t->purge_dead(10, &purged).ok());
  CHECK_EQ(purged, 1u);
  const auto left = scan(*t);
  REQUIRE(left.size() == 2);
  CHECK(left[0].second == rows[0] && left[1].second == rows[2]);
}

// Rows of a two-phase commit are written as TXN_ROW records with their own checksum (covering
// id 0: the id comes at the end); a later read of a committed row, after a reopen too, checks
// its bytes with that checksum (RowLocation::id_less), like any row's.
TEST(a_committed_two_phase_row_is_checked_on_every_read) {
  for (int variant = 0; variant < 4; variant++) {
    const bool reopen_while_prepared = variant & 1;
    const bool crash = variant & 2;  // recovery reads the log instead of the index snapshot
    TempDir dir;
    std::string path = dir.file("q");
    auto t = create_and_open(path);
    REQUIRE(t);
    const std::vector<std::string> rows{job("A"), job("B"), job("C")};
    Holder txn(9);
    std::vector<std::string_view> views(rows.begin(), rows.end());
    uint64_t part = 0;
    REQUIRE(t->prepare_part(&txn, views, "xid-1", &part).ok());
    if (reopen_while_prepared) {
      t = reopen(path);
      REQUIRE(t);
      const auto parts = t->prepared_parts();
      REQUIRE(parts.size() == 1u);
      CHECK_EQ(parts[0].xid, std::string("xid-1"));
      part = parts[0].id;
    }
    REQUIRE(t->end_part(part, true).ok());
    if (crash) {
      t = crash_copy(dir, path, "c");
      path = dir.file("c");
    } else {
      t = reopen(path);  // the rows now come from disk, known by the index snapshot
    }
    REQUIRE(t);
    CHECK_EQ(t->info().rows, 3u);
    const uint64_t b_at = offset_of(path, rows[1]);
    REQUIRE(b_at != 0);
    flip_byte(path, b_at + rows[1].size() / 2);
    RowId id = 0;
    std::string payload;
    bool found = false;
    REQUIRE(t->next_visible(nullptr, 0, &id, &payload, &found).ok() && found && payload == rows[0]);
    Status s = t->next_visible(nullptr, id, &id, &payload, &found);
    CHECK(!s.ok() && mentions(s, path) && mentions(s, "offset " + std::to_string(b_at)));
    CHECK(mentions(s, "checksum"));
    // And after one more (clean) reopen, the damage is still caught: the known checksum was kept.
    t = reopen(path);
    REQUIRE(t);
    REQUIRE(t->next_visible(nullptr, 0, &id, &payload, &found).ok() && found && payload == rows[0]);
    s = t->next_visible(nullptr, id, &id, &payload, &found);
    CHECK(!s.ok() && mentions(s, "offset " + std::to_string(b_at)));
  }
}

// A prepared row damaged on disk before its end: the commit is refused with the damage named
// (the part stays prepared, nothing half-applied); a rollback drops the part cleanly.
TEST(a_damaged_prepared_row_refuses_the_commit_and_rolls_back) {
  TempDir dir;
  const std::string path = dir.file("q");
  auto t = create_and_open(path);
  REQUIRE(t);
  const std::vector<std::string> rows{job("A"), job("B")};
  Holder txn(9);
  std::vector<std::string_view> views(rows.begin(), rows.end());
  uint64_t part = 0;
  REQUIRE(t->prepare_part(&txn, views, "xid-2", &part).ok());
  t = reopen(path);
  REQUIRE(t);
  REQUIRE(t->prepared_parts().size() == 1u);
  part = t->prepared_parts()[0].id;
  const uint64_t b_at = offset_of(path, rows[1]);
  REQUIRE(b_at != 0);
  flip_byte(path, b_at + 3);
  Status s = t->end_part(part, true);
  CHECK(!s.ok() && s.code() == ErrorCode::kDamaged);
  CHECK(mentions(s, "offset " + std::to_string(b_at)));
  CHECK_EQ(t->prepared_parts().size(), 1u);
  CHECK_EQ(t->info().rows, 0u);
  REQUIRE(t->end_part(part, false).ok());
  CHECK_EQ(t->prepared_parts().size(), 0u);
  CHECK_EQ(t->info().rows, 0u);
}
