// TailCache: the newest bytes of a table's data file, kept in memory so that consumers
// who keep up with producers read their rows without a pread. Append-only files never
// change bytes below their end, so a copy made when the bytes were written stays valid
// as long as it is tied to that file object (DataFile::id()).
//
// Not thread-safe: it lives inside the table's Guarded state, next to the row index.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

namespace q4m {

class TailCache {
 public:
  static constexpr size_t kBlockSize = 16u << 10;
  // Rows longer than this are read with pread outside the table lock instead.
  static constexpr size_t kMaxCachedRead = 64u << 10;

  explicit TailCache(size_t capacity = 4u << 20) : capacity_(capacity) {}

  // Forgets everything; the cache then starts at `offset` of file `file_id`.
  void reset(uint64_t file_id, uint64_t offset);
  // `bytes` were written at `offset` of file `file_id`. Contiguous appends to the same
  // file extend the cache (dropping the oldest bytes past the capacity); anything else
  // restarts it.
  void append(uint64_t file_id, uint64_t offset, std::string_view bytes);
  // Copies [offset, offset + length) of file `file_id` into *out if all of it is cached.
  bool read(uint64_t file_id, uint64_t offset, size_t length, std::string* out) const;

  uint64_t file_id() const { return file_id_; }
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }

 private:
  size_t capacity_;
  uint64_t file_id_ = 0;
  uint64_t base_ = 0;   // file offset of blocks_.front()[0]; a multiple of kBlockSize
  uint64_t begin_ = 0;  // cached range [begin_, end_), begin_ >= base_
  uint64_t end_ = 0;
  std::deque<std::unique_ptr<char[]>> blocks_;
  std::unique_ptr<char[]> spare_;  // the last evicted block, reused for the next one
};

}  // namespace q4m
