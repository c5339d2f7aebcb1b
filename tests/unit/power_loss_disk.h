// A simulated disk for power-loss tests. The storage code does its file I/O with plain
// system calls; a test binary linked with -Wl,--wrap=open,... (see the Makefile) sends
// them through the wrappers below, which do the real call and also record, for every file
// under one tracked directory, what a power cut at that instant could leave on disk:
//  - a file's bytes are durable up to its last completed fsync/fdatasync; anything written
//    or truncated after that may or may not have reached the disk, independently for every
//    512-byte sector, and each sector may hold any prefix of the writes that touched it;
//  - the file size may be that of any point since the last sync;
//  - creates, renames and unlinks are durable after an fsync of the directory; before
//    that, any prefix of them (in order, as a journaling file system commits them).
// capture() draws one such outcome for every file, at a random point between system calls.
// The test then runs recovery on each outcome and checks the durability promises.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

extern "C" {
int __real_open(const char* path, int flags, ...);
int __real_close(int fd);
ssize_t __real_pwrite(int fd, const void* buf, size_t n, off_t off);
int __real_ftruncate(int fd, off_t size);
int __real_rename(const char* from, const char* to);
int __real_unlink(const char* path);
}

namespace q4m_test::power {

constexpr uint64_t kSector = 512;

// A file's bytes as `data` followed by zeros up to `size` (preallocated files end in
// a MiB of zeros: not kept hundreds of times over).
struct FileImage {
  std::string data;
  uint64_t size = 0;
  std::string bytes() const {
    std::string b = data;
    b.resize(size, '\0');
    return b;
  }
};

// One power-cut outcome: file name (inside the tracked directory) -> contents.
struct CrashImage {
  uint64_t acks = 0;  // acknowledgements published before the cut (DiskModel::acks)
  std::map<std::string, FileImage> files;
};

class DiskModel {
 public:
  static DiskModel& instance() {
    static DiskModel m;
    return m;
  }

  // Starts recording files under `dir` (an empty directory). Every `capture_every`-th
  // recorded operation (on average) also captures a crash image, up to `max_images`.
  void track(const std::string& dir, uint64_t seed, unsigned capture_every, size_t max_images) {
    std::lock_guard<std::mutex> g(mu_);
    dir_ = dir + "/";
    rng_.seed(seed);
    capture_every_ = std::max(1u, capture_every);
    max_images_ = max_images;
    files_.clear();
    cur_ns_.clear();
    dur_ns_.clear();
    ns_pending_.clear();
    fds_.clear();
    dir_fds_.clear();
    images_.clear();
    tracking_ = true;
  }
  std::vector<CrashImage> stop() {
    std::lock_guard<std::mutex> g(mu_);
    tracking_ = false;
    return std::move(images_);
  }

  // The test records each acknowledgement (an API call that returned) *after* it returned;
  // an image taken when `acks` were published may rely on exactly those.
  std::atomic<uint64_t> acks{0};

  // Counts of what was simulated, for the test's own sanity checks.
  struct Seen {
    uint64_t writes = 0, syncs = 0, dir_syncs = 0, renames = 0;
  };
  Seen seen() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_;
  }

  // ---- called by the wrappers -------------------------------------------------
  void opened(int fd, const char* path, int flags) {
    std::lock_guard<std::mutex> g(mu_);
    if (tracking_ && (flags & O_DIRECTORY) && path && dir_.compare(0, dir_.size() - 1, path) == 0 &&
        std::string(path).size() == dir_.size() - 1) {
      dir_fds_.push_back(fd);
      return;
    }
    if (!tracked(path)) return;
    maybe_capture();
    std::string name = std::string(path).substr(dir_.size());
    auto it = cur_ns_.find(name);
    if (it == cur_ns_.end()) {  // created
      files_.emplace_back();
      int id = static_cast<int>(files_.size()) - 1;
      cur_ns_[name] = id;
      ns_pending_.push_back({NsOp::kCreate, name, "", id});
      fds_[fd] = id;
    } else {
      fds_[fd] = it->second;
    }
  }
  void closed(int fd) {
    std::lock_guard<std::mutex> g(mu_);
    fds_.erase(fd);
    dir_fds_.erase(std::remove(dir_fds_.begin(), dir_fds_.end(), fd), dir_fds_.end());
  }
  void wrote(int fd, const void* buf, size_t n, off_t off) {
    Event e;
    e.kind = Event::kWrite;
    e.offset = static_cast<uint64_t>(off);
    e.bytes.assign(static_cast<const char*>(buf), n);
    record(fd, std::move(e));
  }
  void truncated(int fd, off_t size) {
    Event e;
    e.kind = Event::kTruncate;
    e.size = static_cast<uint64_t>(size);
    record(fd, std::move(e));
  }
  // A sync makes durable what was recorded before it started: returns a token for synced().
  struct SyncToken {
    int file = -1;
    bool dir = false;
    uint64_t seq = 0;
    std::string content;
    std::map<std::string, int> ns;
    size_t ns_ops = 0;
  };
  SyncToken syncing(int fd) {
    std::lock_guard<std::mutex> g(mu_);
    SyncToken t;
    if (!tracking_) return t;
    if (std::find(dir_fds_.begin(), dir_fds_.end(), fd) != dir_fds_.end()) {
      maybe_capture();
      t.dir = true;
      t.ns = cur_ns_;
      t.ns_ops = ns_pending_.size();
      return t;
    }
    auto it = fds_.find(fd);
    if (it == fds_.end()) return t;
    maybe_capture();
    t.file = it->second;
    t.seq = seq_;
    t.content = files_[t.file].current;
    return t;
  }
  void synced(SyncToken& t, bool ok) {
    std::lock_guard<std::mutex> g(mu_);
    if (!tracking_ || !ok) return;
    if (t.dir) {
      seen_.dir_syncs++;
      dur_ns_ = std::move(t.ns);
      ns_pending_.erase(ns_pending_.begin(), ns_pending_.begin() + static_cast<long>(t.ns_ops));
      return;
    }
    if (t.file < 0) return;
    seen_.syncs++;
    File& f = files_[t.file];
    f.durable = std::move(t.content);
    auto& p = f.pending;
    p.erase(std::remove_if(p.begin(), p.end(), [&](const Event& e) { return e.seq <= t.seq; }), p.end());
  }
  // fsync/fdatasync through the model: durable is what was recorded before the call.
  int sync(int fd, int (*real)(int)) {
    SyncToken t = syncing(fd);
    int r = real(fd);
    synced(t, r == 0);
    return r;
  }

  void renamed(const char* from, const char* to) {
    std::lock_guard<std::mutex> g(mu_);
    if (!tracked(from) || !tracked(to)) return;
    maybe_capture();
    seen_.renames++;
    std::string a = std::string(from).substr(dir_.size()), b = std::string(to).substr(dir_.size());
    auto it = cur_ns_.find(a);
    if (it == cur_ns_.end()) return;
    int id = it->second;
    cur_ns_.erase(it);
    cur_ns_[b] = id;
    ns_pending_.push_back({NsOp::kRename, a, b, id});
  }
  void unlinked(const char* path) {
    std::lock_guard<std::mutex> g(mu_);
    if (!tracked(path)) return;
    maybe_capture();
    std::string name = std::string(path).substr(dir_.size());
    if (cur_ns_.erase(name)) ns_pending_.push_back({NsOp::kUnlink, name, "", -1});
  }

 private:
  struct Event {
    enum Kind { kWrite, kTruncate } kind = kWrite;
    uint64_t seq = 0;
    uint64_t offset = 0;  // kWrite
    std::string bytes;    // kWrite
    uint64_t size = 0;    // kTruncate
  };
  struct File {
    std::string durable;  // as of the last completed sync
    std::string current;  // what the process sees
    std::vector<Event> pending;
  };
  struct NsOp {
    enum Kind { kCreate, kRename, kUnlink } kind;
    std::string a, b;
    int id;
  };

  // A write or truncate of a tracked file: what the process sees now, pending on disk.
  void record(int fd, Event e) {
    std::lock_guard<std::mutex> g(mu_);
    File* f = file_of(fd);
    if (!f) return;
    maybe_capture();
    e.seq = ++seq_;
    if (e.kind == Event::kWrite) {
      seen_.writes++;
      if (f->current.size() < e.offset + e.bytes.size()) f->current.resize(e.offset + e.bytes.size(), '\0');
      f->current.replace(e.offset, e.bytes.size(), e.bytes);
    } else {
      f->current.resize(e.size, '\0');
    }
    f->pending.push_back(std::move(e));
  }

  bool tracked(const char* path) const {
    return tracking_ && path && std::string(path).compare(0, dir_.size(), dir_) == 0;
  }
  File* file_of(int fd) {
    if (!tracking_) return nullptr;
    auto it = fds_.find(fd);
    return it == fds_.end() ? nullptr : &files_[it->second];
  }
  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n)(rng_); }  // [0, n]

  void maybe_capture() {
    if (images_.size() >= max_images_ || pick(capture_every_ - 1) != 0) return;
    CrashImage img;
    img.acks = acks.load();  // read first: these returned before everything below
    std::map<std::string, int> ns = dur_ns_;
    const size_t applied = pick(ns_pending_.size());
    for (size_t i = 0; i < applied; i++) {
      const NsOp& op = ns_pending_[i];
      if (op.kind == NsOp::kCreate) ns[op.a] = op.id;
      if (op.kind == NsOp::kUnlink) ns.erase(op.a);
      if (op.kind == NsOp::kRename) {
        auto it = ns.find(op.a);
        if (it != ns.end()) {
          int id = it->second;
          ns.erase(it);
          ns[op.b] = id;
        }
      }
    }
    for (const auto& [name, id] : ns) img.files[name] = image_of(files_[id]);
    images_.push_back(std::move(img));
  }

  // One random outcome of a power cut for `f` (see the header comment).
  FileImage image_of(const File& f) {
    const auto& ev = f.pending;
    uint64_t size = f.durable.size();
    const size_t sized = pick(ev.size());
    for (size_t i = 0; i < sized; i++)
      size = ev[i].kind == Event::kWrite ? std::max(size, ev[i].offset + ev[i].bytes.size()) : ev[i].size;
    std::string img = f.durable;
    img.resize(size, '\0');
    // Which events touch which sector, in order.
    std::map<uint64_t, std::vector<size_t>> touching;
    for (size_t i = 0; i < ev.size(); i++) {
      uint64_t lo, hi;
      if (ev[i].kind == Event::kWrite) {
        if (ev[i].bytes.empty()) continue;
        lo = ev[i].offset;
        hi = ev[i].offset + ev[i].bytes.size();
      } else {
        lo = ev[i].size;
        hi = std::max<uint64_t>(size, lo + 1);  // zeroes what a later extension exposes
      }
      for (uint64_t s = lo / kSector; s * kSector < hi && s * kSector < size; s++) touching[s].push_back(i);
    }
    for (const auto& [sector, list] : touching) {
      const uint64_t lo = sector * kSector, hi = std::min(lo + kSector, size);
      const size_t n = pick(list.size());
      for (size_t k = 0; k < n; k++) {
        const Event& e = ev[list[k]];
        if (e.kind == Event::kWrite) {
          uint64_t a = std::max(lo, e.offset), b = std::min(hi, e.offset + e.bytes.size());
          if (a < b) img.replace(a, b - a, e.bytes, a - e.offset, b - a);
        } else if (e.size < hi) {
          uint64_t a = std::max(lo, e.size);
          std::fill(img.begin() + static_cast<long>(a), img.begin() + static_cast<long>(hi), '\0');
        }
      }
    }
    FileImage out;
    out.size = img.size();
    size_t end = img.find_last_not_of('\0');
    img.resize(end == std::string::npos ? 0 : end + 1);
    out.data = std::move(img);
    return out;
  }

  std::mutex mu_;
  bool tracking_ = false;
  std::string dir_;
  std::mt19937_64 rng_;
  unsigned capture_every_ = 1;
  size_t max_images_ = 0;
  uint64_t seq_ = 0;
  std::vector<File> files_;
  std::map<std::string, int> cur_ns_, dur_ns_;
  std::vector<NsOp> ns_pending_;
  std::map<int, int> fds_;
  std::vector<int> dir_fds_;
  std::vector<CrashImage> images_;
  Seen seen_;
};

}  // namespace q4m_test::power

// ---- the wrappers (linked with -Wl,--wrap=<name>) ---------------------------------
extern "C" {

int __wrap_open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & O_CREAT) {
    va_list ap;
    va_start(ap, flags);
    mode = static_cast<mode_t>(va_arg(ap, int));
    va_end(ap);
  }
  int fd = __real_open(path, flags, mode);
  if (fd >= 0) q4m_test::power::DiskModel::instance().opened(fd, path, flags);
  return fd;
}

int __wrap_close(int fd) {
  q4m_test::power::DiskModel::instance().closed(fd);
  return __real_close(fd);
}

ssize_t __wrap_pwrite(int fd, const void* buf, size_t n, off_t off) {
  ssize_t r = __real_pwrite(fd, buf, n, off);
  if (r > 0) q4m_test::power::DiskModel::instance().wrote(fd, buf, static_cast<size_t>(r), off);
  return r;
}

int __wrap_ftruncate(int fd, off_t size) {
  int r = __real_ftruncate(fd, size);
  if (r == 0) q4m_test::power::DiskModel::instance().truncated(fd, size);
  return r;
}

// The real sync is not made: the model alone decides what a power cut keeps, and the
// test runs in seconds instead of waiting for thousands of disk flushes.
int skip_real_sync(int) { return 0; }
int __wrap_fsync(int fd) { return q4m_test::power::DiskModel::instance().sync(fd, skip_real_sync); }
int __wrap_fdatasync(int fd) { return q4m_test::power::DiskModel::instance().sync(fd, skip_real_sync); }

int __wrap_rename(const char* from, const char* to) {
  int r = __real_rename(from, to);
  if (r == 0) q4m_test::power::DiskModel::instance().renamed(from, to);
  return r;
}

int __wrap_unlink(const char* path) {
  int r = __real_unlink(path);
  if (r == 0) q4m_test::power::DiskModel::instance().unlinked(path);
  return r;
}

}  // extern "C"
