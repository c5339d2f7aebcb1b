// BlockReader: reads a data file front to back through one large buffer, one pread per
// block instead of one per chunk or row (recovery's scans, compaction's copy).
#pragma once
#include <cstdint>
#include <string>

#include "core/file/data_file.h"
#include "core/util/status.h"

namespace q4m {

class BlockReader {
 public:
  // Reads never go past `limit` (the file's size, or the end of the bytes known to be
  // written), except to return a whole requested range.
  BlockReader(const DataFile& f, uint64_t limit) : f_(f), limit_(limit) {}
  // Bytes [pos, pos+len) of the file, valid until the next get().
  Status get(uint64_t pos, size_t len, const unsigned char** out);

 private:
  static constexpr size_t kBlock = 4u << 20;
  const DataFile& f_;
  uint64_t limit_;
  uint64_t start_ = 0;
  std::string buf_;
};

}  // namespace q4m
