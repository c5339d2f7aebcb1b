// One process at a time per data file (storage/file_lock.h): a second process opening a
// table's file is refused, naming the file and the holder, and writes nothing; the lock
// follows the file through compaction and goes with the holder (close, or kill -9).
//
// The second process is this test binary run again (fork + exec) with Q4M_LOCK_CHILD set:
// a fresh process, as a second server would be, whose role runs before main().
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/file/data_file.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m_test;

namespace {

// Child exit codes.
constexpr int kOpened = 0, kRefused = 1, kOtherError = 2;

// Q4M_LOCK_CHILD="<action> <path>": open (and insert a row if that works), drop, rename, or
// hold (open, say "held" on stdout, then wait to be killed). Prints the status message.
int child_role(const char* spec) {
  std::string s(spec);
  const std::string action = s.substr(0, s.find(' ')), path = s.substr(s.find(' ') + 1);
  auto& reg = q4m::TableRegistry::instance();
  q4m::Status st;
  if (action == "drop") {
    st = reg.drop(path);
  } else if (action == "rename") {
    st = reg.rename(path, path + ".renamed");
  } else {
    std::shared_ptr<q4m::QueueTable> t;
    st = reg.acquire(path, &t);
    if (st.ok() && action == "hold") {
      std::printf("held\n");
      std::fflush(stdout);
      for (;;) ::pause();
    }
    if (st.ok()) st = insert1(*t, "from the second process");
  }
  std::printf("%s\n", st.message().c_str());
  std::fflush(stdout);
  return st.ok() ? kOpened : st.code() == q4m::ErrorCode::kLocked ? kRefused : kOtherError;
}

struct ChildRole {
  ChildRole() {
    if (const char* spec = std::getenv("Q4M_LOCK_CHILD")) std::_Exit(child_role(spec));
  }
} child_role_runner;

// Starts this binary as the second process; its stdout comes back through *out_fd.
pid_t spawn(const std::string& action, const std::string& path, int* out_fd) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);  // its name, not "exe", in /proc/PID/comm
  if (n <= 0) return -1;
  self[n] = '\0';
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::close(p[0]);
    ::setenv("Q4M_LOCK_CHILD", (action + " " + path).c_str(), 1);
    ::execl(self, self, static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(p[1]);
  *out_fd = p[0];
  return pid;
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Runs the second process to its end: its exit code, its message in *message.
int run_second(const std::string& action, const std::string& path, std::string* message) {
  int fd = -1;
  pid_t pid = spawn(action, path, &fd);
  if (pid < 0) return -1;
  *message = read_all(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool contains(const std::string& haystack, const std::string& needle) {
  bool found = haystack.find(needle) != std::string::npos;
  if (!found) std::fprintf(stderr, "  '%s' does not contain '%s'\n", haystack.c_str(), needle.c_str());
  return found;
}

std::string holder_text() { return "(pid " + std::to_string(::getpid()) + ", storage_file_lo"; }  // comm: 15 chars

uint64_t count_rows(q4m::QueueTable& t) { return t.visible_count(nullptr); }

ino_t inode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

TEST(a_second_process_is_refused_naming_the_file_and_the_holder) {
  TempDir dir;
  const std::string path = dir.file("q");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(insert1(*t, "a").ok());
  REQUIRE(insert1(*t, "b").ok());
  std::string message;
  CHECK_EQ(run_second("open", path, &message), kRefused);
  CHECK(contains(message, "file " + path + " is in use by another process " + holder_text()));
  // The holder goes on; nothing of the second process reached the file.
  REQUIRE(insert1(*t, "c").ok());
  t.reset();
  auto again = reopen(path);
  REQUIRE(again);
  CHECK_EQ(count_rows(*again), 3u);
  q4m::TableRegistry::instance().close_all();
}

TEST(a_second_process_can_neither_drop_nor_rename_the_file) {
  TempDir dir;
  const std::string path = dir.file("q");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(insert1(*t, "a").ok());
  std::string message;
  CHECK_EQ(run_second("drop", path, &message), kRefused);
  CHECK(contains(message, "is in use by another process"));
  CHECK_EQ(run_second("rename", path, &message), kRefused);
  CHECK(q4m::file_exists(path));
  CHECK(!q4m::file_exists(path + ".renamed"));
  REQUIRE(insert1(*t, "b").ok());
  CHECK_EQ(count_rows(*t), 2u);
  q4m::TableRegistry::instance().close_all();
}

TEST(the_lock_goes_with_the_last_holder_in_the_process) {
  TempDir dir;
  const std::string path = dir.file("q");
  auto first = create_and_open(path);
  REQUIRE(first);
  REQUIRE(insert1(*first, "a").ok());
  // The process opens the file again while the first object lives (as after a close).
  auto second = reopen(path);
  REQUIRE(second);
  std::string message;
  CHECK_EQ(run_second("open", path, &message), kRefused);
  first.reset();
  CHECK_EQ(run_second("open", path, &message), kRefused);  // `second` still holds it
  q4m::TableRegistry::instance().close_all();
  second.reset();
  CHECK_EQ(run_second("open", path, &message), kOpened);
  auto after = reopen(path);
  REQUIRE(after);
  CHECK_EQ(count_rows(*after), 2u);  // ours and the second process's row
  q4m::TableRegistry::instance().close_all();
}

TEST(a_compacted_or_truncated_file_is_locked_too) {
  TempDir dir;
  const std::string path = dir.file("q");
  auto t = create_and_open(path);
  REQUIRE(t);
  for (int i = 0; i < 20; i++) REQUIRE(insert1(*t, "row " + std::to_string(i)).ok());
  q4m::Consumer c;
  for (int i = 0; i < 10; i++) {
    int index = 0;
    REQUIRE(c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &index).ok() && index == 1);
    REQUIRE(c.end().ok());
  }
  const ino_t before = inode_of(path);
  REQUIRE(t->compact().ok());
  CHECK(inode_of(path) != before);  // a new file took the name
  std::string message;
  CHECK_EQ(run_second("open", path, &message), kRefused);
  CHECK(contains(message, holder_text()));
  REQUIRE(insert1(*t, "after").ok());
  CHECK_EQ(count_rows(*t), 11u);
  // TRUNCATE puts a new file in place the same way.
  const ino_t compacted = inode_of(path);
  REQUIRE(t->truncate().ok());
  CHECK(inode_of(path) != compacted);
  CHECK_EQ(run_second("open", path, &message), kRefused);
  REQUIRE(insert1(*t, "after truncate").ok());
  CHECK_EQ(count_rows(*t), 1u);
  q4m::TableRegistry::instance().close_all();
}

TEST(a_killed_holder_leaves_the_file_to_the_next) {
  TempDir dir;
  const std::string path = dir.file("q");
  {
    auto t = create_and_open(path);
    REQUIRE(t);
    REQUIRE(insert1(*t, "a").ok());
    q4m::TableRegistry::instance().close_all();
  }
  int fd = -1;
  pid_t holder = spawn("hold", path, &fd);
  REQUIRE(holder > 0);
  char said[8] = {};
  REQUIRE(::read(fd, said, 5) == 5);  // "held\n": it has the file
  std::shared_ptr<q4m::QueueTable> t;
  q4m::Status st = q4m::TableRegistry::instance().acquire(path, &t);
  CHECK(st.code() == q4m::ErrorCode::kLocked);
  CHECK(contains(st.message(), "(pid " + std::to_string(holder) + ", storage_file_lo"));
  ::kill(holder, SIGKILL);
  int status = 0;
  ::waitpid(holder, &status, 0);
  ::close(fd);
  st = q4m::TableRegistry::instance().acquire(path, &t);
  REQUIRE(st.ok());
  CHECK_EQ(count_rows(*t), 1u);
  q4m::TableRegistry::instance().close_all();
}
