// DEDUP_COLUMN inside the table: the window of keys (dedup_window.h) lives in the writer
// state; the group-commit leader asks it which rows of a batch to write (unique_rows), and
// set_dedup() fills it from the file when the engine first names the column.
#include "core/table/queue_table_impl.h"

namespace q4m {

size_t QueueTableImpl::unique_rows(WriterState& w, const CommitRequest& r, size_t first, uint64_t now_ms,
                                   std::vector<size_t>* rows, std::vector<std::pair<std::string, uint64_t>>* undo) {
  const size_t n = r.rows->size();
  if (!w.dedup_column) {
    for (size_t i = first; i < n; i++) rows->push_back(i);
    return 0;
  }
  w.dedup.set_window_ms(dedup_window_ms_.load(std::memory_order_relaxed));
  size_t duplicates = 0;
  std::string key;
  for (size_t i = first; i < n; i++) {
    const std::string_view payload = (*r.rows)[i];
    if (!row_key(*w.dedup_column, payload, &key)) {  // NULL: no key, never a duplicate
      rows->push_back(i);
      continue;
    }
    if (r.history) {  // a copy: every row goes in; its key counts from its own insert time
      const uint64_t at = r.history[i].insert_time_ms ? r.history[i].insert_time_ms : now_ms;
      w.dedup.remember(key, at, undo);
      rows->push_back(i);
      continue;
    }
    if (!w.dedup.admit(key, now_ms, undo)) {  // also a row earlier in this batch
      duplicates++;
      continue;
    }
    rows->push_back(i);
  }
  return duplicates;
}

void QueueTableImpl::set_dedup(std::shared_ptr<const KeyColumn> column, std::chrono::milliseconds window) {
  dedup_window_ms_.store(static_cast<uint64_t>(window.count()), std::memory_order_relaxed);
  if (!column || dedup_on_.load()) return;  // the column never changes without a new table
  WriterTurn turn(*this);  // no batch is built while the keys are read
  auto w = writer_.lock();
  if (w->dedup_column || !w->file || !w->broken.ok()) return;
  const uint64_t now = now_ms();
  const uint64_t window_ms = static_cast<uint64_t>(window.count());
  w->dedup.set_window_ms(window_ms);
  std::string key;
  // Rows inserted within the window, removed ones too (their bytes stay until compaction,
  // which then writes their keys as DEDUP_KEY records).
  Status s = for_each_record(*w->file, w->file->size(), [&](const fmt::Record& r, std::string_view body) {
    if (r.time_ms + window_ms <= now) return;
    const std::string_view bytes = body.substr(r.payload_pos, r.length);
    if (r.type == fmt::kRow && row_key(*column, bytes, &key))
      w->dedup.remember(key, r.time_ms);
    else if (r.type == fmt::kDedupKey)
      w->dedup.remember(std::string(bytes), r.time_ms);
  });
  if (!s.ok()) {  // inserts stop rather than let a duplicate in
    w->broken = s;
    return;
  }
  w->dedup_column = std::move(column);
  dedup_keys_.store(w->dedup.size(), std::memory_order_relaxed);
  dedup_on_.store(true);
}

}  // namespace q4m
