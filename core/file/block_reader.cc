#include "core/file/block_reader.h"

namespace q4m {

Status BlockReader::get(uint64_t pos, size_t len, const unsigned char** out) {
  if (buf_.empty() || pos < start_ || pos + len > start_ + buf_.size()) {
    size_t want = len > kBlock ? len : kBlock;
    if (pos + want > limit_) want = pos + len > limit_ ? len : static_cast<size_t>(limit_ - pos);
    Status s = f_.read(pos, want, &buf_);
    if (!s.ok()) {
      buf_.clear();  // a failed read leaves no stale bytes to serve
      return s;
    }
    start_ = pos;
  }
  *out = reinterpret_cast<const unsigned char*>(buf_.data()) + (pos - start_);
  return Status::Ok();
}

}  // namespace q4m
