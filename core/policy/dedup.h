// DEDUP_COLUMN and DEDUP_WINDOW: an insert (or relayed row) whose key equals that of a row
// inserted less than the window before is dropped, not written, whatever became of that
// row since (queued, consumed, deleted, expired): SQS FIFO's deduplication id, a "unique
// job". The keys live in the writer state and only the group-commit leader checks and
// records them, while it admits a batch, so two producers of one key cannot both get in.
// They come from the file when the column is first configured (rows inserted within the
// window, removed ones too, and the DEDUP_KEY records compaction writes for rows it drops).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/policy/dedup_window.h"
#include "core/policy/policy.h"

namespace q4m {

class Dedup : public PolicyBase {
 public:
  // The window changes in place; the column is set once (a new column is a new table).
  void configure(const TableOptions& options, WriterContext& ctx);
  void begin_batch(WriterContext&);
  // Drops the rows whose key is in the window (b.deduplicated); a copy's rows all go in,
  // their keys counting from their own insert times, and so do rows decided elsewhere.
  bool admit(WriteBatch& b, WriterContext& ctx);
  void reject(WriteBatch& b);
  void written(WriterContext& ctx);
  void failed(WriterContext& ctx);  // a retry of these rows must not be taken for a duplicate
  void withdraw(const WriteBatch& b);  // their keys are free again
  void keep(ReplacementFile& out, bool truncating);  // compaction keeps the window
  void truncated() { window_.clear(); }               // the new file holds no key: TRUNCATE forgets them too

 private:
  using Undo = std::vector<std::pair<std::string, uint64_t>>;
  std::shared_ptr<const KeyColumn> column_;
  uint64_t window_ms_ = 0;
  DedupWindow window_;
  Undo undo_;                  // the keys this batch put in the window
  size_t request_from_ = 0;    // undo_'s size when the request being admitted began
  uint64_t deduplicated_ = 0;  // rows this batch dropped
  size_t request_deduplicated_ = 0;
};

}  // namespace q4m
