#include "core/file/data_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/util/stats.h"

namespace q4m {

namespace {

// fsync/fdatasync, counted in sys_sync and timed into sync_us.
int timed_sync(int fd, bool data_only) {
  global_stats().sys_sync.add();
  const auto start = std::chrono::steady_clock::now();
  const int rc = data_only ? ::fdatasync(fd) : ::fsync(fd);
  const int err = errno;  // the caller reports it
  const auto took = std::chrono::steady_clock::now() - start;
  global_stats().sync_us.add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
  errno = err;
  return rc;
}

}  // namespace

static DataFile::Identity identity_of(int fd) {
  DataFile::Identity id;
  struct statx sx;
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &sx) == 0) {
    id.inode = sx.stx_ino;
    if (sx.stx_mask & STATX_BTIME)
      id.birth_ns = static_cast<uint64_t>(sx.stx_btime.tv_sec) * 1000000000ull + sx.stx_btime.tv_nsec;
    return id;
  }
  struct stat st;
  if (::fstat(fd, &st) == 0) id.inode = st.st_ino;
  return id;
}

Status io_error(const std::string& what, const std::string& path, int err) {
  ErrorCode code = (err == ENOSPC || err == EDQUOT) ? ErrorCode::kNoSpace
                   : err == ENOENT                 ? ErrorCode::kNotFound
                                                   : ErrorCode::kIo;
  return Status(code, "file " + path + ": " + what + " failed: " + std::strerror(err));
}

DataFile::DataFile(int fd, FileLock lock, std::string path, uint64_t size)
    : fd_(fd), lock_(std::move(lock)), path_(std::move(path)), size_(size), allocated_(size) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  identity_ = identity_of(fd_);
}

DataFile::~DataFile() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// How often open() tries again when the file it locked no longer has the name.
constexpr int kOpenAttempts = 10;

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

Status DataFile::open(const std::string& path, std::shared_ptr<DataFile>* out) {
  for (int attempt = 1;; attempt++) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return io_error("open", path, errno);
    FileLock lock;
    Status s = FileLock::acquire(fd, path, &lock);
    struct stat st, now;
    if (s.ok() && ::fstat(fd, &st) != 0) s = io_error("stat", path, errno);
    if (!s.ok()) {
      ::close(fd);
      return s;
    }
    // The holder may have renamed a new file over the name (compaction) and let go of the
    // one we locked: it is no longer the table's file.
    if (::stat(path.c_str(), &now) == 0 && same_file(st, now)) {
      out->reset(new DataFile(fd, std::move(lock), path, static_cast<uint64_t>(st.st_size)));
      (*out)->unsynced_appends_ = true;  // unknown: a crashed server may have left unsynced chunks
      return Status::Ok();
    }
    ::close(fd);
    if (attempt == kOpenAttempts)
      return Status(ErrorCode::kIo, "file " + path + ": open failed: the file kept being replaced while opening it");
  }
}

Status DataFile::create(const std::string& path, std::shared_ptr<DataFile>* out) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
  if (fd < 0) {
    if (errno == EEXIST) return Status(ErrorCode::kExists, "file " + path + " already exists");
    return io_error("create", path, errno);
  }
  FileLock lock;
  Status s = FileLock::acquire(fd, path, &lock);
  if (!s.ok()) {
    ::close(fd);
    ::unlink(path.c_str());
    return s;
  }
  out->reset(new DataFile(fd, std::move(lock), path, 0));
  return Status::Ok();
}

Status DataFile::write_at(uint64_t offset, const char* data, size_t length, const char* what) {
  size_t done = 0;
  while (done < length) {
    global_stats().sys_write.add();
    ssize_t n = ::pwrite(fd_, data + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error(what, path_, n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status DataFile::append(const std::string& bytes, bool preallocate, Room room) {
  if (!preallocate && allocated_ > size_) {
    Status s = release_preallocation();
    if (!s.ok()) return s;
  }
  if (preallocate && room == Room::kLeaveReserve) {
    // Rows only where the reserve stays whole: on a full disk the INSERT fails here, with
    // nothing written and the reserve kept for the removals that drain the queue.
    const uint64_t need = size_ + bytes.size() + kRemovalReserve;
    if (need > allocated_ && !allocate_to((need / kPreallocStep + 1) * kPreallocStep).ok()) {
      Status s = allocate_to(need);  // a full step did not fit: the reserve alone may
      if (!s.ok()) return s;
    }
  }
  Status s = write_at(size_, bytes.data(), bytes.size(), "write");
  if (!s.ok()) {
    // Take the torn bytes back (and any preallocation): the next append must not follow garbage.
    if (int e = cut_to_data_end()) return io_error("write (and cutting back the partial write)", path_, e);
    return s;
  }
  size_ += bytes.size();
  unsynced_appends_ = true;
  if (size_ > allocated_) allocated_ = size_;
  if (preallocate && allocated_ < size_ + kRemovalReserve) preallocate_after_data();
  return Status::Ok();
}

// Zero-fills up to the next step boundary past the reserve. Only an optimization: on failure
// (ENOSPC) the file keeps what was allocated, and appends extend it as without preallocation.
void DataFile::preallocate_after_data() {
  allocate_to(((size_ + kRemovalReserve - 1) / kPreallocStep + 1) * kPreallocStep);
}

Status DataFile::allocate_to(uint64_t end) {
  static const char kZeros[64 * 1024] = {};
  const uint64_t before = allocated_;
  while (allocated_ < end) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(kZeros), end - allocated_));
    Status s = write_at(allocated_, kZeros, n, "write");
    if (!s.ok()) {
      // Back to what was allocated (zeros: still a valid tail if even this cut fails).
      if (::ftruncate(fd_, static_cast<off_t>(before)) == 0) allocated_ = before;
      return s;
    }
    allocated_ += n;
  }
  return Status::Ok();
}

int DataFile::cut_to_data_end() {
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) return errno;
  allocated_ = size_;
  return 0;
}

Status DataFile::release_preallocation() {
  if (allocated_ == size_) return Status::Ok();
  if (int e = cut_to_data_end()) return io_error("truncate", path_, e);
  return Status::Ok();
}

Status DataFile::sync(SyncMode mode) {
  if (mode == SyncMode::kNone) return Status::Ok();
  int rc = timed_sync(fd_, mode != SyncMode::kFsync);
  if (rc != 0) return io_error(mode == SyncMode::kFsync ? "fsync" : "fdatasync", path_, errno);
  unsynced_appends_ = false;
  return Status::Ok();
}

Status DataFile::overwrite(uint64_t offset, const std::string& bytes) {
  if (offset + bytes.size() > size_) return Status(ErrorCode::kInvalid, "file " + path_ + ": overwrite past the end");
  Status s = write_at(offset, bytes.data(), bytes.size(), "write");
  return s.ok() ? sync(SyncMode::kFdatasync) : s;
}

Status DataFile::read(uint64_t offset, size_t length, std::string* out) const {
  out->resize(length);
  size_t done = 0;
  while (done < length) {
    global_stats().sys_read.add();
    ssize_t n = ::pread(fd_, &(*out)[done], length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("read", path_, errno);
    if (n == 0)
      return Status(ErrorCode::kCorrupt, "file " + path_ + ": unexpected end of file reading " +
                                             std::to_string(length) + " bytes at offset " + std::to_string(offset));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status DataFile::truncate_to(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return io_error("truncate", path_, errno);
  size_ = allocated_ = size;
  if (timed_sync(fd_, false) != 0) return io_error("fsync", path_, errno);
  return Status::Ok();
}

Status sync_directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("open directory", dir, errno);
  int rc = timed_sync(fd, false);
  int e = errno;
  ::close(fd);
  if (rc != 0) return io_error("fsync directory", dir, e);
  return Status::Ok();
}

Status write_file_atomically(const std::string& path, const std::string& contents, bool exclusive) {
  if (exclusive && file_exists(path)) return Status(ErrorCode::kExists, "file " + path + " already exists");
  std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  std::shared_ptr<DataFile> f;
  Status s = DataFile::create(tmp, &f);
  if (!s.ok()) return s;
  s = f->append(contents);
  if (s.ok()) s = f->sync(SyncMode::kFsync);
  f.reset();
  if (s.ok()) s = rename_file(tmp, path);
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

Status rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return io_error("rename to " + to, from, errno);
  Status s = sync_directory_of(to);
  if (s.ok() && from.substr(0, from.rfind('/')) != to.substr(0, to.rfind('/'))) s = sync_directory_of(from);
  return s;
}

Status remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("unlink", path, errno);
  return Status::Ok();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace q4m
