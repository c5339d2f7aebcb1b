#include "core/file/row_check.h"

#include <algorithm>

namespace q4m {

Status check_row(const RowLocation& r, const std::string& path, const char* bytes) {
  if (fmt::row_checksum(r.id_less ? 0 : r.id, std::string_view(bytes, r.length)) == r.expected(bytes)) return Status::Ok();
  return Status(ErrorCode::kDamaged, "file " + path + ": row " + std::to_string(r.id) + " (" +
                                         std::to_string(r.length) + " bytes at offset " + std::to_string(r.offset) +
                                         ") does not match its checksum: its bytes on disk are damaged. It is not "
                                         "returned; it stays in the table, set aside as a dead row");
}

void KnownChecksums::add(RowId id, uint32_t checksum) {
  auto at = ids_.empty() || ids_.back() < id ? ids_.end() : std::lower_bound(ids_.begin(), ids_.end(), id);
  sums_.insert(sums_.begin() + (at - ids_.begin()), checksum);
  ids_.insert(at, id);
}

const uint32_t* KnownChecksums::find(RowId id) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  return it != ids_.end() && *it == id ? &sums_[static_cast<size_t>(it - ids_.begin())] : nullptr;
}

void KnownChecksums::retain(const std::function<bool(RowId)>& keep) {
  size_t n = 0;
  for (size_t i = 0; i < ids_.size(); i++) {
    if (!keep(ids_[i])) continue;
    ids_[n] = ids_[i];
    sums_[n++] = sums_[i];
  }
  ids_.resize(n);
  sums_.resize(n);
  ids_.shrink_to_fit();
  sums_.shrink_to_fit();
}

}  // namespace q4m
