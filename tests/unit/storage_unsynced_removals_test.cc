// queue_sync_removals=OFF (Consumer::set_sync_removals(false)): in a durable sync mode a
// removal is written without a sync, its chunk is flagged `unsynced`, and the first synced
// chunk after unsynced ones is flagged too (docs/file-format.md). The power-cut side is in
// storage_power_loss_test.cc.
#include "core/file/format.h"
#include "core/file/index_snapshot.h"
#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

// The `unsynced` flag of every chunk in the file, in file order (stops at preallocation).
std::vector<bool> chunk_flags(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  std::vector<bool> flags;
  size_t pos = fmt::kFileHeaderSize;
  while (pos + fmt::kChunkHeaderSize <= bytes.size()) {
    fmt::ChunkHeader h;
    if (!fmt::parse_chunk_header(reinterpret_cast<const unsigned char*>(bytes.data() + pos), &h).empty()) break;
    flags.push_back(h.unsynced);
    pos += fmt::kChunkHeaderSize + h.body_len;
  }
  return flags;
}

// The flags of the chunks written after the first `skip` ones.
std::vector<bool> flags_after(const std::string& path, size_t skip) {
  std::vector<bool> all = chunk_flags(path);
  return std::vector<bool>(all.begin() + static_cast<long>(std::min(skip, all.size())), all.end());
}

// What a kill -9 leaves: the file as the kernel has it, opened by recovery elsewhere.
std::vector<std::pair<RowId, std::string>> rows_after_kill(const std::string& path, const TempDir& other) {
  const std::string copy = other.file("killed");
  write_file_bytes(copy, read_file_bytes(path));
  std::shared_ptr<QueueTable> t;
  Status s = TableRegistry::instance().acquire(copy, &t);
  if (!s.ok()) {
    fail(__FILE__, __LINE__, "recovery failed: " + s.message());
    return {};
  }
  return scan(*t);
}

// A new table in sync mode fdatasync, and a second directory for crash images.
struct DurableTable {
  SyncModeScope sync{SyncMode::kFdatasync};
  TempDir dir, other;
  std::string path = dir.file("t");
  std::shared_ptr<QueueTable> t = create_and_open(path);
  ~DurableTable() {
    t.reset();
    TableRegistry::instance().close_all();
  }
};

}  // namespace

TEST(unsynced_removal_skips_the_sync_and_flags_the_next_synced_chunk) {
  DurableTable d;
  REQUIRE(d.t);
  auto& t = d.t;
  const std::string& path = d.path;
  const size_t created = chunk_flags(path).size();
  REQUIRE(insert1(*t, "a").ok());
  REQUIRE(insert1(*t, "b").ok());

  Consumer c;
  CHECK(c.sync_removals());  // the default
  c.set_sync_removals(false);
  int index = 0;
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok());
  REQUIRE(index == 1);
  const uint64_t syncs = global_stats().sys_sync.get();
  const uint64_t unsynced = global_stats().unsynced_removal_commits.get();
  REQUIRE(c.end().ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs);  // no sync for the removal
  CHECK_EQ(global_stats().unsynced_removal_commits.get(), unsynced + 1);
  CHECK_EQ(t->info().rows, 1u);

  REQUIRE(insert1(*t, "c").ok());  // synced: also makes the removal durable
  REQUIRE(insert1(*t, "d").ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 2);
  // insert a (the first chunk after an open is flagged, see the last test), insert b,
  // removal (no sync, but everything before it was synced: not flagged, issue 40), insert c
  // (written while the removal is unsynced), insert d
  CHECK(flags_after(path, created) == std::vector<bool>({true, false, false, true, false}));

  // The removal was written: a server crash (the kernel keeps the bytes) keeps it.
  auto rows = rows_after_kill(path, d.other);
  REQUIRE(rows.size() == 3u);
  CHECK_EQ(rows[0].second, "b");
  CHECK_EQ(rows[2].second, "d");
}

TEST(synced_removal_syncs_and_a_consumer_can_switch_back) {
  DurableTable d;
  REQUIRE(d.t);
  auto& t = d.t;
  for (const char* r : {"a", "b"}) REQUIRE(insert1(*t, r).ok());
  Consumer c;
  int index = 0;
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok());
  uint64_t syncs = global_stats().sys_sync.get();
  REQUIRE(c.end().ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);

  c.set_sync_removals(false);
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok());
  c.set_sync_removals(true);  // what the next removal (the end inside wait) asks for counts
  syncs = global_stats().sys_sync.get();
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok());
  CHECK_EQ(index, 0);  // timed out, after ending "b"
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);
  CHECK_EQ(t->info().rows, 0u);
}

TEST(delete_with_unsynced_removals_does_not_sync) {
  DurableTable d;
  REQUIRE(d.t);
  auto& t = d.t;
  const std::string& path = d.path;
  for (const char* r : {"a", "b", "c"}) REQUIRE(insert1(*t, r).ok());
  Consumer viewer;
  viewer.set_sync_removals(false);
  auto rows = scan(*t, &viewer);
  REQUIRE(rows.size() == 3u);
  REQUIRE(t->claim_for_delete(&viewer, rows[0].first));
  REQUIRE(t->claim_for_delete(&viewer, rows[2].first));
  const uint64_t syncs = global_stats().sys_sync.get();
  REQUIRE(t->remove_claimed(&viewer).ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs);
  auto left = rows_after_kill(path, d.other);
  REQUIRE(left.size() == 1u);
  CHECK_EQ(left[0].second, "b");
}

// Chunks written in sync mode none are not synced either: the first durable chunk after a
// switch to fdatasync, and after a reopen (a crashed server may have left unsynced chunks),
// is flagged; the one after it is not.
TEST(first_synced_chunk_after_sync_none_or_a_reopen_is_flagged) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  const size_t created = chunk_flags(path).size();
  {
    SyncModeScope sync(SyncMode::kNone);
    REQUIRE(insert1(*t, "a").ok());
  }
  SyncModeScope sync(SyncMode::kFdatasync);
  REQUIRE(insert1(*t, "b").ok());
  REQUIRE(insert1(*t, "c").ok());
  CHECK(flags_after(path, created) == std::vector<bool>({true, true, false}));

  t.reset();
  t = reopen(path);
  REQUIRE(t);
  const size_t before = chunk_flags(path).size();
  REQUIRE(insert1(*t, "d").ok());
  REQUIRE(insert1(*t, "e").ok());
  CHECK(flags_after(path, before) == std::vector<bool>({true, false}));
  CHECK_EQ(scan(*t).size(), 5u);
  TableRegistry::instance().close_all();
}

// A power cut while the insert after an unsynced removal is being synced may keep the
// insert's chunk and lose part of the removal's. Neither caller was answered for both to be
// durable (the insert's had not returned), so recovery must cut both as a lost tail, not
// call the file corrupt: that is what flagging the first synced chunk after unsynced ones
// is for.
TEST(power_cut_before_the_covering_sync_is_a_lost_tail_not_corruption) {
  DurableTable d;
  REQUIRE(d.t);
  auto& t = d.t;
  const std::string& path = d.path;
  REQUIRE(insert1(*t, "a").ok());
  REQUIRE(insert1(*t, "b").ok());
  const size_t removal_chunk = chunk_flags(path).size();
  Consumer c;
  c.set_sync_removals(false);
  int index = 0;
  REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok());
  REQUIRE(c.end().ok());
  REQUIRE(insert1(*t, "c").ok());

  // The removal chunk's last byte never reached the disk; the insert's chunk did.
  std::string image = read_file_bytes(path);
  size_t pos = fmt::kFileHeaderSize;
  fmt::ChunkHeader h;
  for (size_t i = 0; i <= removal_chunk; i++) {
    REQUIRE(fmt::parse_chunk_header(reinterpret_cast<const unsigned char*>(image.data() + pos), &h).empty());
    if (i < removal_chunk) pos += fmt::kChunkHeaderSize + h.body_len;
  }
  image[pos + fmt::kChunkHeaderSize + h.body_len - 1] ^= 0x5a;
  const std::string copy = d.other.file("cut");
  write_file_bytes(copy, image);
  std::shared_ptr<QueueTable> recovered;
  Status s = TableRegistry::instance().acquire(copy, &recovered);
  REQUIRE(s.ok());
  auto rows = scan(*recovered);
  REQUIRE(rows.size() == 2u);  // "a" is back (its removal came undone); "c" was never answered
  CHECK_EQ(rows[0].second, "a");
  CHECK_EQ(rows[1].second, "b");
  CHECK(recovered->info().torn_tail_bytes > 0);
}

// A clean close writes an index snapshot that the next open trusts if the file's size and
// last 64 KiB match. Unsynced chunks before that could lose sectors to a power cut after the
// close unseen, so the close syncs the file first, in every sync mode.
TEST(a_clean_close_syncs_unsynced_chunks_before_its_index_snapshot) {
  for (bool sync_none : {true, false}) {
    SyncModeScope sync(sync_none ? SyncMode::kNone : SyncMode::kFdatasync);
    TempDir dir;
    const std::string path = dir.file("t");
    auto t = create_and_open(path);
    REQUIRE(t);
    REQUIRE(insert1(*t, "a").ok());
    REQUIRE(insert1(*t, "b").ok());
    Consumer c;
    c.set_sync_removals(false);
    int index = 0;
    REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok());
    REQUIRE(c.end().ok());  // unsynced in either mode
    const uint64_t syncs = global_stats().sys_sync.get();
    t.reset();
    TableRegistry::instance().close_all();
    // The data file's sync, then the snapshot file's own and its directory's; in sync mode
    // none (every chunk flagged `unsynced`) also the synced mark's after the data file's.
    CHECK_EQ(global_stats().sys_sync.get() - syncs, sync_none ? 4u : 3u);
    CHECK(file_exists_for_test(index_snapshot_path(path)));
    t = reopen(path);
    REQUIRE(t);
    auto rows = scan(*t);
    REQUIRE(rows.size() == 1u);
    CHECK_EQ(rows[0].second, "b");
    t.reset();
    TableRegistry::instance().close_all();
  }
}
