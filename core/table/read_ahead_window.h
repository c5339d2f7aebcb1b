// ReadAheadWindow: blocks of a table's data file read in one pread each, ahead of the rows
// consumers need next. Consumers of a deep backlog (rows older than the tail cache) take
// rows in id order, which is file order, so one pread of a block serves the next
// thousands of small rows instead of one pread each.
//
// Blocks are aligned to kSize, so concurrent consumers reading rows close to each other
// ask for the same block instead of evicting each other's; two blocks are kept so that
// consumers on both sides of a block boundary do not evict each other either.
// Only published bytes below the tail cache go into a block: they never change, so a
// block stays valid for as long as it is tied to the same file object (DataFile::id()).
// Not thread-safe: it lives inside the table's Guarded state, next to the tail cache.
#pragma once
#include <cstdint>
#include <string>

namespace q4m {

class ReadAheadWindow {
 public:
  static constexpr size_t kSize = 256u << 10;

  // What to read for a row at [offset, offset + length) that is not cached: the aligned
  // block around it, cut at `published_end` (where the tail cache begins), stretched to
  // the row's end if the row crosses the block's end. False: read the row alone (a long
  // row, or no published bytes beyond it).
  struct Plan {
    uint64_t begin = 0, end = 0;
  };
  static bool plan(uint64_t offset, size_t length, uint64_t published_end, Plan* out);

  // Copies [offset, offset + length) of file `file_id` into *out if a block holds it.
  bool read(uint64_t file_id, uint64_t offset, size_t length, std::string* out) const;
  // `bytes` were read at `offset` of file `file_id`; they replace the block that starts
  // lower (consumers move forward through the file).
  void fill(uint64_t file_id, uint64_t offset, std::string bytes);

 private:
  struct Block {
    uint64_t file_id = 0;
    uint64_t begin = 0;
    std::string bytes;
    bool holds(uint64_t id, uint64_t offset, size_t length) const {
      return id == file_id && !bytes.empty() && offset >= begin && offset + length <= begin + bytes.size();
    }
  };
  Block& victim_for(uint64_t file_id, uint64_t offset);
  Block blocks_[2];
};

}  // namespace q4m
