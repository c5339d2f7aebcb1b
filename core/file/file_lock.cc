#include "core/file/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/file/data_file.h"
#include "core/util/guarded.h"

namespace q4m {

namespace {

using Key = std::pair<dev_t, ino_t>;

struct Held {
  int fd;          // our own descriptor of the locked open file description
  size_t holders;  // FileLocks of this inode in this process
};

// Never destroyed: files held by other statics (the table registry) release into it at exit.
Guarded<std::map<Key, Held>>& held_locks() {
  static auto* locks = new Guarded<std::map<Key, Held>>();
  return *locks;
}

// "pid 1234, mariadbd" for the process holding a flock on the inode, from /proc/locks
// (lines like "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"); empty if not found.
std::string holder_of(dev_t dev, ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::ostringstream want;
  want << std::hex << major(dev) << ':' << minor(dev) << ':' << std::dec << ino;
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream in(line);
    std::string number, type, mode, access, pid, where;
    in >> number >> type;
    if (type != "FLOCK") continue;  // also skips "->" lines (waiters)
    in >> mode >> access >> pid >> where;
    // The device is printed as %02x:%02x: compare after dropping leading zeros.
    unsigned maj = 0, min = 0;
    unsigned long long node = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &node) != 3) continue;
    if (maj != major(dev) || min != minor(dev) || node != ino || pid.empty() || pid[0] == '-' || pid == "0")
      continue;
    std::string name;
    std::ifstream comm("/proc/" + pid + "/comm");
    std::getline(comm, name);
    return "pid " + pid + (name.empty() ? "" : ", " + name);
  }
  return "";
}

}  // namespace

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    dev_ = o.dev_;
    ino_ = o.ino_;
    held_ = std::exchange(o.held_, false);
  }
  return *this;
}

Status FileLock::acquire(int fd, const std::string& path, FileLock* out) {
  out->release();
  struct stat st;
  if (::fstat(fd, &st) != 0) return io_error("stat", path, errno);
  const Key key{st.st_dev, st.st_ino};
  {
    auto locks = held_locks().lock();
    auto it = locks->find(key);
    if (it == locks->end()) {
      // A descriptor of our own keeps the lock however the caller's fd is closed.
      int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (own < 0) return io_error("lock (dup)", path, errno);
      if (::flock(own, LOCK_EX | LOCK_NB) == 0) {
        it = locks->emplace(key, Held{own, 0}).first;
      } else {
        const int e = errno;
        ::close(own);
        if (e != EWOULDBLOCK) return io_error("lock (flock)", path, e);
        it = locks->end();
      }
    }
    if (it != locks->end()) {
      it->second.holders++;
      out->dev_ = key.first;
      out->ino_ = key.second;
      out->held_ = true;
      return Status::Ok();
    }
  }
  const std::string holder = holder_of(key.first, key.second);
  return Status(ErrorCode::kLocked, "file " + path + " is in use by another process" +
                                        (holder.empty() ? "" : " (" + holder + ")") +
                                        ": a queue table's file can be open in one server only (two servers on "
                                        "one datadir, or a database directory shared between servers?)");
}

void FileLock::release() {
  if (!held_) return;
  held_ = false;
  auto locks = held_locks().lock();
  auto it = locks->find(Key{dev_, ino_});
  if (it == locks->end() || --it->second.holders > 0) return;
  ::close(it->second.fd);  // the last descriptor of the locked description: the lock goes
  locks->erase(it);
}

}  // namespace q4m
