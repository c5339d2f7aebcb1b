// Crash recovery: torn tails are cut, damage in the middle is reported, nothing
// acknowledged is lost and nothing is invented.
#include "core/util/crc32c.h"
#include "core/file/format.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

struct Written {
  RowId id;
  std::string payload;
  uint64_t file_end;  // file size once its insert returned
};

// Inserts n rows one by one, recording where the file ended after each.
std::vector<Written> write_rows(QueueTable& t, int n) {
  std::vector<Written> out;
  for (int i = 0; i < n; i++) {
    Written w;
    w.payload = "row-" + std::to_string(i) + std::string(static_cast<size_t>(i % 5), '.');
    if (!insert1(t, w.payload, &w.id).ok()) break;
    w.file_end = t.info().file_bytes;
    out.push_back(w);
  }
  return out;
}

// Creates `path` with n rows (in the caller's sync mode), closes it cleanly and returns
// the file's bytes; *rows (optional) tells where each insert ended.
std::string closed_file_with_rows(const std::string& path, int n, std::vector<Written>* rows = nullptr) {
  auto t = create_and_open(path);
  if (!t) return "";
  std::vector<Written> written = write_rows(*t, n);
  t.reset();
  TableRegistry::instance().close_all();
  if (rows) *rows = std::move(written);
  return read_file_bytes(path);
}

// A copy of `bytes` whose file header says version 1 (before the unsynced chunk flag).
std::string with_version_header(const std::string& bytes, uint32_t version) {
  std::string h(fmt::kFileMagic, sizeof(fmt::kFileMagic));
  fmt::put_u32(&h, version);
  fmt::put_u32(&h, crc32c(h));
  return h + bytes.substr(fmt::kFileHeaderSize);
}

}  // namespace

TEST(truncate_at_every_byte_offset) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("src");
  auto t = create_and_open(path);
  REQUIRE(t);
  auto rows = write_rows(*t, 6);
  REQUIRE(rows.size() == 6);
  // Consume one row so REMOVE records are part of what gets cut.
  Consumer c;
  int idx;
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  uint64_t remove_end = t->info().file_bytes;
  t.reset();
  TableRegistry::instance().close_all();
  std::string bytes = read_file_bytes(path);
  // Sync mode none flags every chunk: the close's sync is followed by its synced mark (cut
  // like any torn tail when a length ends inside it).
  REQUIRE(bytes.size() == remove_end + fmt::kChunkHeaderSize);
  CHECK_EQ(bytes.substr(remove_end), fmt::synced_mark_chunk());

  for (size_t len = 0; len <= bytes.size(); len++) {
    std::string p = dir.file("cut" + std::to_string(len));
    write_file_bytes(p, bytes.substr(0, len));
    std::shared_ptr<QueueTable> r;
    Status s = TableRegistry::instance().acquire(p, &r);
    if (len < 16) {  // inside the file header: reported, never a crash
      CHECK(s.code() == ErrorCode::kCorrupt);
      continue;
    }
    if (!s.ok()) {
      std::fprintf(stderr, "len %zu: %s\n", len, s.message().c_str());
      CHECK(s.ok());
      continue;
    }
    auto seen = scan(*r);
    // Expected: every row whose insert had returned by `len`, minus the consumed first
    // row if its removal had returned by `len`.
    std::vector<std::pair<RowId, std::string>> want;
    uint64_t good_end = 16;
    for (size_t i = 0; i < rows.size(); i++) {
      if (rows[i].file_end > len) break;
      good_end = rows[i].file_end;
      if (i == 0 && len >= remove_end) continue;
      want.emplace_back(rows[i].id, rows[i].payload);
    }
    if (len >= remove_end) good_end = remove_end;
    if (len == bytes.size()) good_end = len;  // the whole synced mark
    CHECK(seen == want);
    if (seen != want) std::fprintf(stderr, "  at len %zu\n", len);
    TableStats info = r->info();
    CHECK_EQ(info.file_bytes, good_end);
    CHECK_EQ(info.torn_tail_bytes, len - good_end);
    // The next row id never goes back to an id that was possibly handed out.
    CHECK(info.next_rowid > (want.empty() ? 0 : want.back().first));
    // The cut file accepts new rows and they survive another reopen.
    RowId nid;
    REQUIRE(insert1(*r, "after", &nid).ok());
    r.reset();
    r = reopen(p, &s);
    REQUIRE(r);
    auto again = scan(*r);
    REQUIRE(!again.empty());
    CHECK_EQ(again.back().second, "after");
    CHECK_EQ(again.size(), want.size() + 1);
    r.reset();
    TableRegistry::instance().drop(p);
  }
}

// Chunks written in a durable mode were synced before the next one was written: damage
// followed by one of them is corruption, whatever the cause, and is never cut away.
TEST(corrupt_middle_chunk_is_kcorrupt_with_offset) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  std::vector<Written> rows;
  std::string bytes = closed_file_with_rows(path, 3, &rows);
  REQUIRE(rows.size() == 3);
  uint64_t second = rows[0].file_end;  // offset of the second chunk
  // Damage the body, then (separately) the header, of the middle chunk.
  for (uint64_t at : {second + 20, second + 5}) {
    std::string bad = bytes;
    bad[at] ^= 0x40;
    write_file_bytes(path, bad);
    std::shared_ptr<QueueTable> r;
    Status s = TableRegistry::instance().acquire(path, &r);
    CHECK(s.code() == ErrorCode::kCorrupt);
    std::string want = "file " + path + ": corrupt chunk at offset " + std::to_string(second) + ": ";
    CHECK(s.message().rfind(want, 0) == 0);
    if (s.message().rfind(want, 0) != 0) std::fprintf(stderr, "  got: %s\n", s.message().c_str());
    CHECK_EQ(read_file_bytes(path), bad);  // nothing was cut
  }
}

// Sync mode none promises survival of a server crash only: after a power cut any sector
// of the unsynced chunks may be lost while later ones survive. Damage followed only by
// such chunks is cut like a torn tail (rows before it kept, the table opens), never
// "corrupt"; damage followed by a durable chunk still is.
TEST(damage_among_unsynced_chunks_is_cut_not_corrupt) {
  TempDir dir;
  std::string path = dir.file("t");
  std::vector<Written> rows;
  std::string bytes;
  std::string closed;  // as the clean close left it: the synced mark after the flagged chunks
  {
    SyncModeScope sync(SyncMode::kNone);
    closed = closed_file_with_rows(path, 4, &rows);
    REQUIRE(rows.size() == 4);
  }
  // What a power cut can leave has no mark: the close writes it after its sync.
  const uint64_t mark = rows.back().file_end;
  REQUIRE(closed.size() == mark + fmt::kChunkHeaderSize);
  CHECK_EQ(closed.substr(mark), fmt::synced_mark_chunk());
  bytes = closed.substr(0, mark);
  const uint64_t second = rows[0].file_end;
  // After a clean close the same damage is damage: every chunk was synced (the mark says so).
  {
    std::string bad = closed;
    bad[second + 20] ^= 0x40;
    write_file_bytes(path, bad);
    Status s;
    auto r = reopen(path, &s);
    CHECK(s.code() == ErrorCode::kCorrupt);
    CHECK(s.message().find("corrupt chunk at offset " + std::to_string(second)) != std::string::npos);
    CHECK_EQ(read_file_bytes(path), bad);
    r.reset();
    TableRegistry::instance().close_all();
  }
  for (uint64_t at : {second + 20, second + 5, second}) {  // body, header length, magic
    std::string bad = bytes;
    bad[at] ^= 0x40;
    write_file_bytes(path, bad);
    Status s;
    auto r = reopen(path, &s);
    CHECK(s.ok());
    if (!s.ok()) std::fprintf(stderr, "  got: %s\n", s.message().c_str());
    REQUIRE(r);
    auto left = scan(*r);
    CHECK_EQ(left.size(), 1u);
    if (!left.empty()) CHECK_EQ(left[0].second, rows[0].payload);
    CHECK_EQ(r->info().torn_tail_bytes, bytes.size() - second);
    CHECK_EQ(read_file_bytes(path).size(), second);
    r.reset();
    TableRegistry::instance().close_all();
  }
  // The same damage followed by chunks written with fdatasync: corruption. (The first chunk
  // after an open is flagged, since unsynced chunks may precede it; its sync makes them
  // durable, so the second is not flagged, and a damaged chunk before it is no power cut.)
  write_file_bytes(path, bytes);
  {
    SyncModeScope sync(SyncMode::kFdatasync);
    auto t = reopen(path);
    REQUIRE(t);
    REQUIRE(insert1(*t, "durable").ok());
    REQUIRE(insert1(*t, "durable 2").ok());
  }
  TableRegistry::instance().close_all();
  std::string with_durable = read_file_bytes(path);
  with_durable[second + 20] ^= 0x40;
  write_file_bytes(path, with_durable);
  std::shared_ptr<QueueTable> r;
  Status s = TableRegistry::instance().acquire(path, &r);
  CHECK(s.code() == ErrorCode::kCorrupt);
  CHECK(s.message().find("corrupt chunk at offset " + std::to_string(second)) != std::string::npos);
  CHECK_EQ(read_file_bytes(path), with_durable);
}

TEST(bad_file_header_is_kcorrupt) {
  TempDir dir;
  std::string path = dir.file("t");
  write_file_bytes(path, std::string(100, 'z'));
  std::shared_ptr<QueueTable> r;
  Status s = TableRegistry::instance().acquire(path, &r);
  CHECK(s.code() == ErrorCode::kCorrupt);
  CHECK(s.message().find(path) != std::string::npos);
}

TEST(garbage_tail_after_valid_chunks_is_cut) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  std::string bytes = closed_file_with_rows(path, 2);
  REQUIRE(!bytes.empty());
  // Zeros are a durable-mode preallocation: cut, but not reported as a torn write.
  for (char fill : {'\0', '\xab'}) {
    write_file_bytes(path, bytes + std::string(4096, fill));
    Status s;
    auto r = reopen(path, &s);
    REQUIRE(r);
    CHECK_EQ(scan(*r).size(), 2u);
    CHECK_EQ(r->info().torn_tail_bytes, fill == '\0' ? 0u : 4096u);
    CHECK_EQ(read_file_bytes(path).size(), bytes.size());
  }
}

// The original lost acknowledged rows after a crash that followed a compaction,
// because its compaction markers failed checksum validation.
TEST(crash_after_compaction_loses_nothing) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  auto rows = write_rows(*t, 20);
  Consumer c;
  int idx;
  for (int i = 0; i < 10; i++) REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());  // rows 0..9 consumed
  REQUIRE(t->compact().ok());
  RowId late;
  REQUIRE(insert1(*t, "late", &late).ok());
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());  // row 10 consumed after the compaction
  t.reset();
  // "Crash": no clean close, reopen straight from the file.
  std::string bytes = read_file_bytes(path);
  std::string copy = dir.file("copy");
  write_file_bytes(copy, bytes);
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(copy, &r).ok());
  auto seen = scan(*r);
  REQUIRE(seen.size() == 10);
  for (size_t i = 0; i < 9; i++) CHECK_EQ(seen[i].first, rows[11 + i].id);
  CHECK_EQ(seen[9].first, late);
  CHECK_EQ(r->info().next_rowid, late + 1);
  CHECK_EQ(r->counters().rows_inserted.get(), 21u);
  CHECK_EQ(r->counters().rows_removed.get(), 11u);
}

TEST(everything_consumed_then_compacted_keeps_ids_monotonic) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  auto rows = write_rows(*t, 5);
  Consumer c;
  int idx;
  for (int i = 0; i < 5; i++) REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  REQUIRE(t->compact().ok());
  t.reset();
  Status s;
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(t->info().rows, 0u);
  RowId id;
  REQUIRE(insert1(*t, "next", &id).ok());
  CHECK(id > rows.back().id);
}

TEST(leftover_tmp_from_crash_mid_compaction_is_ignored) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  std::vector<Written> rows;
  std::string bytes = closed_file_with_rows(path, 4, &rows);
  REQUIRE(rows.size() == 4);
  // A compaction that died before its rename leaves a partial "<path>.tmp".
  write_file_bytes(path + ".tmp", bytes.substr(0, bytes.size() / 2));
  Status s;
  auto t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(scan(*t).size(), 4u);
  CHECK(!file_exists_for_test(path + ".tmp"));
  REQUIRE(t->compact().ok());  // and compaction still works afterwards
  t.reset();
  t = reopen(path, &s);
  REQUIRE(t);
  auto seen = scan(*t);
  REQUIRE(seen.size() == 4);
  for (size_t i = 0; i < 4; i++) CHECK_EQ(seen[i].first, rows[i].id);
}

// A payload may contain any bytes, even the image of a valid chunk (a relayed data
// file, say). A torn last chunk carrying one must still be cut as a torn tail.
TEST(chunk_image_inside_a_torn_payload_is_not_mistaken_for_a_later_chunk) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  RowId a;
  REQUIRE(insert1(*t, "A", &a).ok());
  uint64_t a_end = t->info().file_bytes;
  std::string image;
  fmt::ChunkBuilder b(&image);
  b.add_row(999, 1, "embedded");
  b.finish();
  REQUIRE(insert1(*t, image + std::string(100, 'z')).ok());
  t.reset();
  TableRegistry::instance().close_all();
  std::string bytes = read_file_bytes(path);
  REQUIRE(bytes.size() > fmt::kChunkHeaderSize);
  bytes.resize(bytes.size() - fmt::kChunkHeaderSize);  // a crash leaves no synced mark (close())
  // (1) cut after the embedded image, (2) complete chunk with a flipped byte at its end
  std::string cut = bytes.substr(0, a_end + 16 + 21 + image.size() + 10);
  std::string flipped = bytes;
  flipped[flipped.size() - 1] ^= 1;
  for (const std::string& variant : {cut, flipped}) {
    std::string p = dir.file("v");
    write_file_bytes(p, variant);
    std::shared_ptr<QueueTable> r;
    Status s = TableRegistry::instance().acquire(p, &r);
    CHECK(s.ok());
    if (!s.ok()) std::fprintf(stderr, "  %s\n", s.message().c_str());
    if (r) {
      auto rows = scan(*r);
      CHECK_EQ(rows.size(), 1u);
      CHECK_EQ(r->info().file_bytes, a_end);
    }
    r.reset();
    TableRegistry::instance().drop(p);
  }
}

// An older reader would misread what this build appends (version 1: the unsynced flag,
// cut as a torn tail; version 2: RETURN records, called corrupt), so an older file gets the
// current header (synced) when it is opened, before anything is appended.
TEST(older_files_are_upgraded_on_open) {
  SyncModeScope sync(SyncMode::kNone);
  for (uint32_t version : {1u, 2u}) {
    TempDir dir;
    std::string path = dir.file("t");
    std::string bytes = closed_file_with_rows(path, 3);
    REQUIRE(!bytes.empty());
    write_file_bytes(path, with_version_header(bytes, version));
    for (const char* how : {"recovery", "index snapshot"}) {
      Status s;
      auto r = reopen(path, &s);
      REQUIRE(r);
      CHECK_EQ(scan(*r).size(), 3u);
      std::string now = read_file_bytes(path);
      CHECK_EQ(fmt::get_u32(now.data() + 8), fmt::kFormatVersion);
      if (fmt::get_u32(now.data() + 8) != fmt::kFormatVersion)
        std::fprintf(stderr, "  version %u after %s\n", version, how);
      r.reset();
      TableRegistry::instance().close_all();  // leaves a snapshot: the second round opens from it
      write_file_bytes(path, with_version_header(read_file_bytes(path), version));
    }
  }
}
