// Durable-mode preallocation: the data file is zero-filled ahead of the data so that
// fdatasync flushes data only. The zeros must never be mistaken for data, for a torn
// tail worth reporting, or for corruption; and they must never end up between chunks.
#include <sys/stat.h>

#include "core/file/data_file.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

uint64_t size_on_disk(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::vector<std::string> payloads_of(QueueTable& t) {
  std::vector<std::string> out;
  for (auto& r : scan(t)) out.push_back(r.second);
  return out;
}

std::vector<std::string> insert_n(QueueTable& t, int n, const std::string& tag) {
  std::vector<std::string> out;
  for (int i = 0; i < n; i++) {
    std::string p = tag + "-" + std::to_string(i);
    if (!insert1(t, p).ok()) break;
    out.push_back(p);
  }
  return out;
}

// What the disk holds right now, as a crash would leave it, copied to a new table path.
std::string crash_image(const TempDir& dir, const std::string& path, const std::string& name) {
  std::string copy = dir.file(name);
  write_file_bytes(copy, read_file_bytes(path));
  return copy;
}

}  // namespace

TEST(durable_appends_preallocate_and_a_clean_close_releases_it) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  auto want = insert_n(*t, 20, "a");
  REQUIRE(want.size() == 20);
  uint64_t data_end = t->info().file_bytes;
  CHECK(data_end < DataFile::kPreallocStep);
  CHECK_EQ(size_on_disk(path), DataFile::kPreallocStep);  // zero-filled ahead
  t.reset();
  TableRegistry::instance().close_all();
  CHECK_EQ(size_on_disk(path), data_end);  // released before the index snapshot
  t = reopen(path);
  REQUIRE(t);
  CHECK(payloads_of(*t) == want);
  CHECK_EQ(t->info().torn_tail_bytes, 0u);
}

TEST(crash_with_a_preallocated_tail_recovers_every_row_and_reports_nothing) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  auto want = insert_n(*t, 30, "b");
  Consumer c;
  int idx;
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
  REQUIRE(c.end().ok());
  want.erase(want.begin());
  uint64_t data_end = t->info().file_bytes;
  std::string image = crash_image(dir, path, "crashed");
  REQUIRE(size_on_disk(image) > data_end);

  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(image, &r).ok());
  CHECK(payloads_of(*r) == want);
  CHECK_EQ(r->info().torn_tail_bytes, 0u);  // zeros are not a torn write
  CHECK_EQ(r->info().file_bytes, data_end);
  CHECK_EQ(size_on_disk(image), data_end);
  // Appending after recovery continues right after the data.
  auto more = insert_n(*r, 5, "after");
  r.reset();
  std::string again = crash_image(dir, image, "crashed-again");
  std::shared_ptr<QueueTable> r2;
  REQUIRE(TableRegistry::instance().acquire(again, &r2).ok());
  want.insert(want.end(), more.begin(), more.end());
  CHECK(payloads_of(*r2) == want);
}

TEST(torn_chunk_inside_preallocated_space_is_cut) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  auto want = insert_n(*t, 10, "c");
  uint64_t data_end = t->info().file_bytes;
  std::string bytes = read_file_bytes(path);
  REQUIRE(bytes.size() > data_end + 100);
  // A write that reached the disk only partly: the first bytes of the last chunk again.
  bytes.replace(data_end, 16 + 3, bytes.substr(16, 16 + 3));  // a header and 3 body bytes
  std::string image = dir.file("torn");
  write_file_bytes(image, bytes);
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(image, &r).ok());
  CHECK(payloads_of(*r) == want);
  CHECK(r->info().torn_tail_bytes > 0);
  CHECK_EQ(size_on_disk(image), data_end);
}

TEST(zeros_before_a_valid_chunk_are_corruption_not_preallocation) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  insert_n(*t, 1, "d");
  uint64_t second = t->info().file_bytes;
  insert_n(*t, 1, "d2");
  uint64_t third = t->info().file_bytes;
  insert_n(*t, 1, "d3");  // a valid chunk after the zeroed one
  std::string bytes = read_file_bytes(path);
  bytes.replace(second, third - second, std::string(third - second, '\0'));
  std::string image = dir.file("gap");
  write_file_bytes(image, bytes);
  std::shared_ptr<QueueTable> r;
  Status s = TableRegistry::instance().acquire(image, &r);
  CHECK(s.code() == ErrorCode::kCorrupt);
  CHECK(s.message().find("offset " + std::to_string(second)) != std::string::npos);
}

// Unsynced writes into preallocated blocks may reach the disk out of order; in sync
// mode none the preallocation is therefore dropped before the next append.
TEST(switching_to_sync_none_releases_the_preallocation) {
  TempDir dir;
  std::string path = dir.file("t");
  std::shared_ptr<QueueTable> t;
  std::vector<std::string> want;
  {
    SyncModeScope sync(SyncMode::kFdatasync);
    t = create_and_open(path);
    REQUIRE(t);
    want = insert_n(*t, 5, "e");
    CHECK_EQ(size_on_disk(path), DataFile::kPreallocStep);
  }
  SyncModeScope none(SyncMode::kNone);
  auto more = insert_n(*t, 5, "f");
  CHECK_EQ(size_on_disk(path), t->info().file_bytes);
  want.insert(want.end(), more.begin(), more.end());
  t = reopen(path);
  REQUIRE(t);
  CHECK(payloads_of(*t) == want);
}

// RENAME opens a second handle on the same inode: it must start at the end of the
// data, not at the end of the preallocation (that would leave zeros between chunks).
TEST(rename_then_append_leaves_no_zero_gap) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string from = dir.file("t"), to = dir.file("u");
  auto t = create_and_open(from);
  REQUIRE(t);
  auto want = insert_n(*t, 5, "g");
  t.reset();
  REQUIRE(TableRegistry::instance().rename(from, to).ok());
  std::shared_ptr<QueueTable> u;
  REQUIRE(TableRegistry::instance().acquire(to, &u).ok());
  auto more = insert_n(*u, 5, "h");
  want.insert(want.end(), more.begin(), more.end());
  std::string image = crash_image(dir, to, "renamed-crashed");
  std::shared_ptr<QueueTable> r;
  Status s = TableRegistry::instance().acquire(image, &r);
  REQUIRE(s.ok());
  CHECK(payloads_of(*r) == want);
  CHECK_EQ(r->info().torn_tail_bytes, 0u);
}

TEST(preallocation_grows_in_steps_and_compaction_keeps_every_live_row) {
  SyncModeScope sync(SyncMode::kFdatasync);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  std::string big(200 * 1024, 'x');
  std::vector<std::string> want;
  for (int i = 0; i < 12; i++) {  // ~2.4 MB: crosses two step boundaries
    std::string p = std::to_string(i) + big;
    REQUIRE(insert1(*t, p).ok());
    want.push_back(p);
    uint64_t end = t->info().file_bytes;
    uint64_t disk = size_on_disk(path);
    CHECK(disk > end);
    CHECK(disk % DataFile::kPreallocStep == 0);
  }
  Consumer c;
  int idx;
  for (int i = 0; i < 6; i++) {
    REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok());
    REQUIRE(c.end().ok());
  }
  want.erase(want.begin(), want.begin() + 6);
  REQUIRE(t->compact().ok());
  auto more = insert_n(*t, 3, "i");
  want.insert(want.end(), more.begin(), more.end());
  std::string image = crash_image(dir, path, "compacted-crashed");
  std::shared_ptr<QueueTable> r;
  REQUIRE(TableRegistry::instance().acquire(image, &r).ok());
  CHECK(payloads_of(*r) == want);
  CHECK_EQ(r->info().torn_tail_bytes, 0u);
}

