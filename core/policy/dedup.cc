#include "core/policy/dedup.h"

#include "core/file/data_file.h"

#include <map>
#include <utility>
#include <vector>

namespace q4m {

void Dedup::configure(const TableOptions& options, WriterContext& ctx) {
  window_ms_ = static_cast<uint64_t>(options.dedup_window.count());
  if (column_ || !options.dedup || !ctx.file || !ctx.broken->ok()) return;
  window_.set_window_ms(window_ms_);
  std::string key;
  // Rows inserted within the window, removed ones too (their bytes stay until compaction,
  // which then writes their keys as DEDUP_KEY records).
  const KeyColumn& column = *options.dedup;
  // Rows of two-phase parts (every INSERT with the binary log on): their keys count once their
  // part committed, or while it is still prepared (its keys were admitted at its prepare, as
  // they are while the server runs); a rolled-back part's do not. (They were not read at all:
  // with the binary log on a restart that walked the file forgot every key, issue 40.)
  std::map<uint64_t, std::vector<std::pair<std::string, uint64_t>>> parts;
  Status s = for_each_record(*ctx.file, ctx.file->size(), [&](const fmt::Record& r, std::string_view body) {
    if (r.type == fmt::kTxnEnd) {
      auto it = parts.find(r.txn);
      if (it == parts.end()) return;
      if (r.committed)
        for (const auto& [k, t] : it->second) window_.remember(k, t);
      parts.erase(it);
      return;
    }
    if (r.time_ms + window_ms_ <= ctx.now_ms) return;
    const std::string_view bytes = body.substr(r.payload_pos, r.length);
    if (r.type == fmt::kRow && row_key(column, bytes, &key))
      window_.remember(key, r.time_ms);
    else if (r.type == fmt::kTxnRow && row_key(column, bytes, &key))
      parts[r.txn].emplace_back(key, r.time_ms);
    else if (r.type == fmt::kDedupKey)
      window_.remember(std::string(bytes), r.time_ms);
  });
  for (const auto& [txn, keys] : parts)  // still prepared
    for (const auto& [k, t] : keys) window_.remember(k, t);
  if (!s.ok()) {  // inserts stop rather than let a duplicate in
    *ctx.broken = s;
    return;
  }
  column_ = options.dedup;
  ctx.counters->dedup_keys.set(window_.size());
}

void Dedup::begin_batch(WriterContext&) {
  window_.set_window_ms(window_ms_);
  undo_.clear();
  deduplicated_ = 0;
}

bool Dedup::admit(WriteBatch& b, WriterContext& ctx) {
  request_from_ = undo_.size();
  request_deduplicated_ = 0;
  if (!column_ || !b.inserts()) return true;
  std::string key;
  size_t kept = 0;
  for (size_t i : b.admitted) {
    const std::string_view payload = (*b.rows)[i];
    if (!row_key(*column_, payload, &key)) {  // NULL: no key, never a duplicate
      b.admitted[kept++] = i;
      continue;
    }
    if (b.decided || (b.history && b.history[i].copy)) {
      window_.remember(key, b.inserted_at(i, ctx.now_ms), &undo_);
      b.admitted[kept++] = i;
      continue;
    }
    if (!window_.admit(key, ctx.now_ms, &undo_)) {  // also a row earlier in this batch
      request_deduplicated_++;
      continue;
    }
    b.admitted[kept++] = i;
  }
  b.admitted.resize(kept);
  b.deduplicated = request_deduplicated_;
  deduplicated_ += request_deduplicated_;
  return true;
}

void Dedup::reject(WriteBatch& b) {
  window_.forget_batch(&undo_, request_from_);
  deduplicated_ -= request_deduplicated_;
  b.deduplicated = 0;
}

void Dedup::written(WriterContext& ctx) {
  ctx.counters->rows_deduplicated.add(deduplicated_);
  if (column_) ctx.counters->dedup_keys.set(window_.size());
  undo_.clear();
}

void Dedup::failed(WriterContext& ctx) {
  window_.forget_batch(&undo_);
  ctx.counters->dedup_keys.set(window_.size());
}

void Dedup::withdraw(const WriteBatch& b) {
  if (!column_ || !b.rows) return;
  std::string key;
  for (std::string_view payload : *b.rows)
    if (row_key(*column_, payload, &key)) window_.forget(key);
}

void Dedup::keep(ReplacementFile& out, bool truncating) {
  if (truncating) return;
  // The keys of the window, whose rows may be gone (consumed) and so not copied.
  if (column_) window_.for_each(now_ms(), [&](const std::string& key, uint64_t time_ms) { out.add_dedup_key(time_ms, key); });
}

}  // namespace q4m
