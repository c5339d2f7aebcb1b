// Checking a row's bytes read back from disk (docs/file-format.md "Row checksums"): every read
// that takes a row from the file, rather than from the bytes this process wrote (tail cache),
// checks them before anyone sees them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/file/format.h"
#include "core/util/status.h"

namespace q4m {

// Where a row's bytes are and what they must match. A row written since format 5 carries its
// checksum on disk, after its payload; a row of an older file has none there, and the one
// recovery computed from its verified chunk at open is given instead (KnownChecksums; so for a
// row a prepared transaction committed).
struct RowLocation {
  RowId id = 0;
  uint64_t offset = 0;  // of the payload in the file
  uint32_t length = 0;  // of the payload
  bool stored = true;   // the checksum follows the payload on disk
  uint32_t known = 0;   // !stored: the checksum recovery computed
  // The stored checksum covers id 0, not the row's: a TXN_ROW's (written before the row had
  // an id). It checks the bytes; the index, which its TXN_END filled, gives the id.
  bool id_less = false;
  // What to read: the payload, and the checksum after it if stored.
  size_t disk_length() const { return length + (stored ? fmt::kRowChecksumSize : 0); }
  // The checksum the row must match, given its disk_length() bytes.
  uint32_t expected(const char* bytes) const { return stored ? fmt::get_u32(bytes + length) : known; }
};

// Ok if `bytes` (disk_length() of them, read at r.offset of `path`) match the row's checksum;
// else kDamaged naming the file, the row, its offset and its length.
Status check_row(const RowLocation& r, const std::string& path, const char* bytes);

// The checksums of the rows whose record has none covering their id: rows of a file of format
// 1 to 4, and rows a prepared transaction committed (a TXN_ROW is written before its row has
// an id). Computed by recovery from each row's bytes once their chunk's checksum passed, or
// at the commit from the bytes checked against the TXN_ROW's own checksum; carried by the
// index snapshot, dropped when compaction rewrites the rows with checksums of their own.
// 12 bytes a row, in row-id order (rows get their ids in order).
class KnownChecksums {
 public:
  void add(RowId id, uint32_t checksum);  // in id order, as rows get their ids (else sorted in)
  const uint32_t* find(RowId id) const;  // null: the row has its checksum on disk
  void retain(const std::function<bool(RowId)>& keep);  // drops the others
  bool empty() const { return ids_.empty(); }
  size_t size() const { return ids_.size(); }
  uint64_t memory_bytes() const { return ids_.capacity() * sizeof(RowId) + sums_.capacity() * sizeof(uint32_t); }
  RowId id_at(size_t i) const { return ids_[i]; }
  uint32_t checksum_at(size_t i) const { return sums_[i]; }
  void clear() {
    ids_ = {};
    sums_ = {};
  }

 private:
  std::vector<RowId> ids_;
  std::vector<uint32_t> sums_;
};

}  // namespace q4m
