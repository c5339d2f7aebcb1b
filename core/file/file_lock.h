// FileLock: this process's exclusive hold on a data file, so that a second server reaching
// the same file (a symlinked database directory, two servers on one datadir) is refused
// instead of writing into it alongside us.
//
// The lock is flock(2) on the file's open file description: it belongs to the inode, not
// to the name, so it stays with a file renamed over the table's path (compaction), and the
// kernel drops it when the holder dies. POSIX record locks would not do: they belong to the
// process and vanish when it closes ANY descriptor of the file, which the core does (a
// table's file is opened again by rename and reopen). OFD record locks (F_OFD_SETLK) would
// do as well as flock, but /proc/locks shows their holder as pid -1, and the error names the
// holder's pid. Within one process the file may be open several times: every FileLock of
// one inode shares one flock, held until the last goes. (On NFS, Linux emulates flock with
// record locks; two servers on NFS are not covered.)
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>

#include "core/util/status.h"

namespace q4m {

class FileLock {
 public:
  FileLock() = default;
  ~FileLock() { release(); }
  FileLock(FileLock&& o) noexcept : dev_(o.dev_), ino_(o.ino_), held_(std::exchange(o.held_, false)) {}
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Locks the file open as `fd`, or joins this process's lock on it. kLocked, naming
  // `path` and the holder (its pid and name if they can be found), if another process holds it.
  static Status acquire(int fd, const std::string& path, FileLock* out);
  void release();

 private:
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool held_ = false;
};

}  // namespace q4m
