#include "core/table/read_ahead_window.h"

#include <algorithm>

#include "core/table/tail_cache.h"

namespace q4m {

bool ReadAheadWindow::plan(uint64_t offset, size_t length, uint64_t published_end, Plan* out) {
  // A long row is read alone, outside any lock, as the tail cache does.
  if (length > TailCache::kMaxCachedRead || offset + length > published_end) return false;
  const uint64_t begin = offset - offset % kSize;
  const uint64_t end = std::max(std::min(begin + kSize, published_end), offset + length);
  if (end - begin <= length) return false;  // the block would be the row itself
  out->begin = begin;
  out->end = end;
  return true;
}

bool ReadAheadWindow::read(uint64_t file_id, uint64_t offset, size_t length, std::string* out) const {
  for (const Block& b : blocks_) {
    if (b.holds(file_id, offset, length)) {
      out->assign(b.bytes.data() + (offset - b.begin), length);
      return true;
    }
  }
  return false;
}

ReadAheadWindow::Block& ReadAheadWindow::victim_for(uint64_t file_id, uint64_t offset) {
  for (Block& b : blocks_)  // the same block read twice by consumers that raced
    if (b.file_id == file_id && b.begin == offset) return b;
  for (Block& b : blocks_)  // a block of a replaced file, or never filled
    if (b.file_id != file_id || b.bytes.empty()) return b;
  return blocks_[0].begin <= blocks_[1].begin ? blocks_[0] : blocks_[1];
}

void ReadAheadWindow::fill(uint64_t file_id, uint64_t offset, std::string bytes) {
  Block& b = victim_for(file_id, offset);
  b.file_id = file_id;
  b.begin = offset;
  b.bytes = std::move(bytes);
}

}  // namespace q4m
