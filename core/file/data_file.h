// DataFile: one open data file (POSIX fd). Appends go through one writer at a time
// (the group-commit leader); reads (pread) may come from any thread. Every error
// is a Status naming the path and the errno text; ENOSPC/EDQUOT map to kNoSpace.
// Every DataFile holds its file's FileLock: another process cannot open it meanwhile.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/file/file_lock.h"
#include "core/util/settings.h"
#include "core/util/status.h"

namespace q4m {

Status io_error(const std::string& what, const std::string& path, int err);

class DataFile {
 public:
  ~DataFile();
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;

  // Opens an existing file for append + read. kNotFound if it does not exist, kLocked if
  // another process has it open (file_lock.h).
  static Status open(const std::string& path, std::shared_ptr<DataFile>* out);
  // Creates `path` exclusively (kExists if present), empty, locked as by open().
  static Status create(const std::string& path, std::shared_ptr<DataFile>* out);

  // Writes `bytes` at the end (one pwrite, retried only on a short write). On failure
  // the file is cut back to its previous size so no torn bytes precede later chunks.
  // With `preallocate` (durable sync modes only) the file is kept zero-filled up to the
  // next kPreallocStep boundary, so later appends overwrite allocated blocks and
  // fdatasync flushes data only, not the inode (docs/file-format.md, "Preallocation").
  // Without it, preallocated space is released first: unsynced writes into it could
  // reach the disk out of order, leaving a zero gap before a valid chunk.
  //
  // `room`: with preallocation, an append that adds rows (kLeaveReserve) first makes sure
  // kRemovalReserve zero-filled bytes stay allocated after it, and fails with ENOSPC, writing
  // nothing, if the file system cannot give them; other appends (removals, returns, commit
  // records) may use them. So consumers keep draining a queue whose disk is full: a full disk
  // refuses INSERTs first (docs/recovery.md, "Full file system").
  enum class Room { kMayUseReserve, kLeaveReserve };
  Status append(const std::string& bytes, bool preallocate = false, Room room = Room::kMayUseReserve);
  // Room kept for removals past the data of a durable-mode file: about 9,000 single-row
  // removals (a 29-byte chunk each), 2,300 with the binary log on (prepare + commit, ~114).
  static constexpr uint64_t kRemovalReserve = 256u << 10;
  // Cuts the file back to size() (drops the zero-filled preallocation, if any).
  Status release_preallocation();
  Status sync(SyncMode mode);  // no-op for kNone
  // Bytes were appended since the last sync (a durable mode's sync of a chunk then also
  // makes them durable). Writer only.
  bool has_unsynced_appends() const { return unsynced_appends_; }
  Status read(uint64_t offset, size_t length, std::string* out) const;
  // Overwrites `bytes` at `offset` inside the data and syncs (fdatasync). Only for the
  // file header's one-time version upgrade: everything else is appended.
  Status overwrite(uint64_t offset, const std::string& bytes);
  Status truncate_to(uint64_t size);  // used by recovery to cut a torn tail

  static constexpr uint64_t kPreallocStep = 1u << 20;
  uint64_t size() const { return size_; }  // end of the data; only the writer changes it
  // Unique per DataFile object (never reused), so a copy of its bytes can name its source.
  uint64_t id() const { return id_; }
  // The file on disk (inode and birth time, from when it was opened or created): tells this
  // file from one that replaced it under the same name (compaction, TRUNCATE, DROP and CREATE).
  // A prepared part's redo in the binary log names it (core/table/redo.h).
  struct Identity {
    uint64_t inode = 0;
    uint64_t birth_ns = 0;
    bool operator==(const Identity& o) const { return inode == o.inode && birth_ns == o.birth_ns; }
  };
  const Identity& identity() const { return identity_; }
  const std::string& path() const { return path_; }
  // After rename(2) of a file nobody else holds yet (a replacement being installed).
  void set_path_unshared(const std::string& path) { path_ = path; }

 private:
  DataFile(int fd, FileLock lock, std::string path, uint64_t size);
  Status write_at(uint64_t offset, const char* data, size_t length, const char* what);
  void preallocate_after_data();
  Status allocate_to(uint64_t end);  // zero-fills [allocated_, end); on failure keeps what was allocated
  int cut_to_data_end();  // ftruncate to size_ (torn bytes, preallocation); 0 or errno
  int fd_;
  FileLock lock_;  // released after fd_ is closed (members go after the destructor's body)
  uint64_t id_;
  Identity identity_;
  std::string path_;
  uint64_t size_;       // end of the data
  uint64_t allocated_;  // file size on disk: data + zero-filled preallocation
  bool unsynced_appends_ = false;
};

// Creates `path` atomically with `contents` (write to path.tmp, sync, rename, sync dir).
Status write_file_atomically(const std::string& path, const std::string& contents, bool exclusive);
Status sync_directory_of(const std::string& path);
Status rename_file(const std::string& from, const std::string& to);  // + directory sync
Status remove_file(const std::string& path);                         // ENOENT is fine
bool file_exists(const std::string& path);

}  // namespace q4m
