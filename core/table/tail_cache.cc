#include "core/table/tail_cache.h"

#include <algorithm>
#include <cstring>

namespace q4m {

void TailCache::reset(uint64_t file_id, uint64_t offset) {
  if (!blocks_.empty() && !spare_) spare_ = std::move(blocks_.back());
  blocks_.clear();
  file_id_ = file_id;
  base_ = offset - offset % kBlockSize;
  begin_ = end_ = offset;
}

void TailCache::append(uint64_t file_id, uint64_t offset, std::string_view bytes) {
  if (file_id != file_id_ || offset != end_) reset(file_id, offset);
  if (bytes.size() > capacity_) {  // would evict itself: not worth copying
    reset(file_id, offset + bytes.size());
    return;
  }
  while (!bytes.empty()) {
    const size_t block = static_cast<size_t>((end_ - base_) / kBlockSize);
    const size_t at = static_cast<size_t>((end_ - base_) % kBlockSize);
    if (block == blocks_.size())
      blocks_.push_back(spare_ ? std::move(spare_) : std::unique_ptr<char[]>(new char[kBlockSize]));
    const size_t n = std::min(bytes.size(), kBlockSize - at);
    std::memcpy(blocks_[block].get() + at, bytes.data(), n);
    bytes.remove_prefix(n);
    end_ += n;
  }
  while (end_ - base_ > capacity_ + kBlockSize) {
    spare_ = std::move(blocks_.front());
    blocks_.pop_front();
    base_ += kBlockSize;
  }
  begin_ = std::max(begin_, base_);
}

bool TailCache::read(uint64_t file_id, uint64_t offset, size_t length, std::string* out) const {
  if (file_id != file_id_ || length > kMaxCachedRead || offset < begin_ || offset > end_ ||
      length > end_ - offset)
    return false;
  out->resize(length);
  size_t done = 0;
  while (done < length) {
    const uint64_t pos = offset + done - base_;
    const size_t at = static_cast<size_t>(pos % kBlockSize);
    const size_t n = std::min(length - done, kBlockSize - at);
    std::memcpy(&(*out)[done], blocks_[static_cast<size_t>(pos / kBlockSize)].get() + at, n);
    done += n;
  }
  return true;
}

}  // namespace q4m
