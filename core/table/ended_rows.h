// EndedRows: a table's history (HISTORY_RETENTION, docs/sql-api.md "History"): the rows that
// ended within the retention period, in the order they ended, with how each ended. Their
// payloads stay in the data file (compaction copies them while they are kept). Not
// thread-safe: it lives in the table's Guarded state.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "core/file/format.h"
#include "core/row/ended_row.h"

namespace q4m {

class EndedRows {
 public:
  void add(const EndedRow& r) {
    rows_.push_back(r);
    bytes_ += r.length;
  }
  // Forgets the rows that ended before `cutoff_ms` (wall clock). Rows end in order, so this
  // looks at the oldest ones only (a clock stepped back may keep one a little longer).
  void expire(uint64_t cutoff_ms) {
    while (!rows_.empty() && rows_.front().end_ms < cutoff_ms) {
      bytes_ -= rows_.front().length;
      rows_.pop_front();
    }
  }
  void clear() {
    rows_.clear();
    bytes_ = 0;
    marks_.clear();
  }
  bool empty() const { return rows_.empty(); }
  uint64_t size() const { return rows_.size(); }
  uint64_t bytes() const { return bytes_; }  // payload bytes
  // Their bytes in the data file, as compaction writes them (HISTORY_ROW records).
  uint64_t file_bytes() const {
    return bytes_ + rows_.size() * (fmt::kRowHeaderSize + fmt::kRowChecksumSize + fmt::kHistoryRowEndSize);
  }
  std::deque<EndedRow>& rows() { return rows_; }
  const std::deque<EndedRow>& rows() const { return rows_; }
  // A copy in row-id order (a scan's), of the rows that ended at or after `cutoff_ms`.
  std::vector<EndedRow> by_id(uint64_t cutoff_ms) const {
    std::vector<EndedRow> out;
    out.reserve(rows_.size());
    for (const EndedRow& r : rows_)
      if (r.end_ms >= cutoff_ms) out.push_back(r);
    std::sort(out.begin(), out.end(), [](const EndedRow& a, const EndedRow& b) { return a.id < b.id; });
    return out;
  }

  // How a claimed row will end if its claim is removed (a DELETE, the expiry, a purge); a
  // row with no mark that ends ends consumed. Kept only while the table keeps history.
  // `deliveries` >= 0: the count to record (a replica's, as its primary named it).
  void mark(RowId id, EndKind kind, int32_t deliveries = -1) { marks_[id] = Mark{kind, deliveries}; }
  void unmark(RowId id) {
    if (!marks_.empty()) marks_.erase(id);
  }
  EndKind kind_of(RowId id) const {
    if (marks_.empty()) return EndKind::kConsumed;
    auto it = marks_.find(id);
    return it == marks_.end() ? EndKind::kConsumed : it->second.kind;
  }
  uint16_t deliveries_of(RowId id, uint16_t counted) const {
    if (marks_.empty()) return counted;
    auto it = marks_.find(id);
    return it == marks_.end() || it->second.deliveries < 0 ? counted : static_cast<uint16_t>(it->second.deliveries);
  }

 private:
  std::deque<EndedRow> rows_;
  uint64_t bytes_ = 0;
  struct Mark {
    EndKind kind;
    int32_t deliveries;
  };
  std::unordered_map<RowId, Mark> marks_;
};

}  // namespace q4m
