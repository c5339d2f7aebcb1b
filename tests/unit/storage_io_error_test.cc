// I/O failures: reported with path and errno text, the file is cut back so no torn
// bytes precede later chunks, and the table keeps working once the cause is gone.
#include <signal.h>
#include <sys/resource.h>

#include "core/file/data_file.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

TEST(errno_mapping) {
  CHECK(io_error("write", "/x/t.Q4M", ENOSPC).code() == ErrorCode::kNoSpace);
  CHECK(io_error("write", "/x/t.Q4M", EDQUOT).code() == ErrorCode::kNoSpace);
  CHECK(io_error("write", "/x/t.Q4M", EIO).code() == ErrorCode::kIo);
  Status s = io_error("write", "/x/t.Q4M", ENOSPC);
  CHECK(s.message().find("/x/t.Q4M") != std::string::npos);
  CHECK(s.message().find("No space left on device") != std::string::npos);
}

TEST(failed_append_is_cut_back_and_table_recovers) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  RowId first;
  REQUIRE(insert1(*t, "before", &first).ok());
  uint64_t size = t->info().file_bytes;
  // The process may not grow files past `size + 100` bytes: a 1000-byte row fails part-way.
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  ::getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = size + 100;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  Status s = insert1(*t, std::string(1000, 'z'));
  ::setrlimit(RLIMIT_FSIZE, &old);
  CHECK(s.code() == ErrorCode::kIo);
  CHECK(s.message().find(path) != std::string::npos);
  CHECK_EQ(t->info().file_bytes, size);
  CHECK_EQ(read_file_bytes(path).size(), size);  // the partial write was taken back
  CHECK_EQ(t->info().rows, 1u);
  RowId second;
  REQUIRE(insert1(*t, "after", &second).ok());
  CHECK(second > first);
  t.reset();
  t = reopen(path, &s);
  REQUIRE(t);
  auto rows = scan(*t);
  REQUIRE(rows.size() == 2);
  CHECK_EQ(rows[0].second, "before");
  CHECK_EQ(rows[1].second, "after");
  CHECK_EQ(t->info().torn_tail_bytes, 0u);
}

TEST(failed_compaction_leaves_old_file) {
  SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  std::string row(5000, 'r');
  for (int i = 0; i < 20; i++) REQUIRE(insert1(*t, row).ok());
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  ::getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 20000;  // the copy cannot be completed
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  Status s = t->compact();
  ::setrlimit(RLIMIT_FSIZE, &old);
  CHECK(!s.ok());
  CHECK(!file_exists_for_test(path + ".tmp"));
  CHECK_EQ(scan(*t).size(), 20u);
  REQUIRE(insert1(*t, "more").ok());
  t.reset();
  t = reopen(path, &s);
  REQUIRE(t);
  CHECK_EQ(scan(*t).size(), 21u);
}
