#include "core/policy/relay.h"

namespace q4m {

bool Relay::admit(WriteBatch& b, WriterContext&) {
  if (!b.relayed()) return true;
  auto it = sources_.find(b.relay_source);
  const RowId last = (b.relay_reset || it == sources_.end()) ? 0 : it->second;
  const size_t n = b.rows->size();
  while (b.replayed < n && b.relay_rowids[b.replayed] <= last) b.replayed++;
  b.admitted.erase(b.admitted.begin(), b.admitted.begin() + static_cast<std::ptrdiff_t>(b.replayed));
  return true;
}

void Relay::persist(WriteBatch& b, fmt::ChunkBuilder& chunk) {
  if (b.relay_record) {
    auto it = sources_.find(b.relay_source);
    undo_.emplace_back(b.relay_source, it == sources_.end() ? 0 : it->second);
    sources_[b.relay_source] = b.relay_last;
    chunk.add_srcid(b.relay_source, b.relay_last);
    return;
  }
  const size_t n = b.relayed() ? b.rows->size() : 0;
  if (b.replayed == n) return;  // not relayed, or nothing new: no record
  auto it = sources_.find(b.relay_source);
  undo_.emplace_back(b.relay_source, it == sources_.end() ? 0 : it->second);
  const RowId last = b.relay_rowids[n - 1];  // duplicates dropped by dedup were received too
  sources_[b.relay_source] = last;
  chunk.add_srcid(b.relay_source, last);  // the same chunk as the rows: atomic
}

void Relay::failed(WriterContext&) {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    if (it->second)
      sources_[it->first] = it->second;
    else
      sources_.erase(it->first);
  }
  undo_.clear();
}

void Relay::take_over(const Relay& from, fmt::ChunkBuilder& chunk) {
  for (const auto& [source, last] : from.sources_) {
    auto it = sources_.find(source);
    const RowId ours = it == sources_.end() ? 0 : it->second;
    if (ours >= last) continue;
    undo_.emplace_back(source, ours);
    sources_[source] = last;
    chunk.add_srcid(source, last);
  }
}

void Relay::keep(ReplacementFile& out, bool) {
  for (const auto& [source, last] : sources_) out.add_srcid(source, last);
}

RowId Relay::last(uint32_t source) const {
  auto it = sources_.find(source);
  return it == sources_.end() ? 0 : it->second;
}

}  // namespace q4m
