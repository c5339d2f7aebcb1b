#include "core/policy/relay.h"

#include <algorithm>

namespace q4m {

void Relay::opened(RecoveredTable& recovered) {
  sources_ = std::move(recovered.sources);
  pending_.clear();
  for (const auto& [txn, part] : recovered.prepared)
    if (!part.relay.empty()) pending_[txn] = part.relay;
}

RowId Relay::last(uint32_t source) const {
  auto it = sources_.find(source);
  return it == sources_.end() ? 0 : it->second;
}

RowId Relay::admitted_last(uint32_t source) const {
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it)  // the newest part first
    for (auto m = it->second.rbegin(); m != it->second.rend(); ++m)
      if (m->source == source) return m->last;
  return last(source);
}

bool Relay::admit(WriteBatch& b, WriterContext&) {
  b.relay_marks.clear();
  b.replays.clear();
  if (!b.relay) return true;
  auto mark_of = [&](uint32_t source) -> fmt::SourceMark* {
    for (fmt::SourceMark& m : b.relay_marks)
      if (m.source == source) return &m;
    return nullptr;
  };
  std::vector<size_t> kept;
  kept.reserve(b.admitted.size());
  for (size_t i : b.admitted) {
    const RelayTag& tag = b.relay[i];
    if (tag.id == 0) {  // a plain row
      kept.push_back(i);
      continue;
    }
    fmt::SourceMark* m = mark_of(tag.source);
    if (tag.reset) {  // mode 'w': what the source sent before is forgotten
      if (!m) {
        b.relay_marks.push_back(fmt::SourceMark{tag.source, 0, true});
        m = &b.relay_marks.back();
      }
      m->last = 0;
      m->reset = true;
    }
    const RowId last = m ? m->last : admitted_last(tag.source);
    if (tag.id <= last) {  // received before: a replay
      b.replays.push_back(i);
      continue;
    }
    if (!m) {
      b.relay_marks.push_back(fmt::SourceMark{tag.source, 0, false});
      m = &b.relay_marks.back();
    }
    m->last = tag.id;  // duplicates dropped by dedup later were received too
    kept.push_back(i);
  }
  // A source all of whose rows were replays has nothing new to record (unless reset).
  b.relay_marks.erase(std::remove_if(b.relay_marks.begin(), b.relay_marks.end(),
                                     [](const fmt::SourceMark& m) { return m.last == 0 && !m.reset; }),
                      b.relay_marks.end());
  b.admitted = std::move(kept);
  return true;
}

void Relay::save() {
  if (!saved_) saved_ = std::make_unique<Saved>(Saved{sources_, pending_});
}

void Relay::apply(const fmt::SourceMark& m) {
  RowId& last = sources_[m.source];
  last = m.applied_to(last);
}

void Relay::persist(WriteBatch& b, fmt::ChunkBuilder& chunk) {
  for (size_t i = 0; i < b.relay_record_count; i++) b.relay_marks.push_back(b.relay_records[i]);
  if (b.relay_marks.empty()) return;
  save();
  if (b.phase == WriteBatch::Phase::kPrepare) {
    for (const fmt::SourceMark& m : b.relay_marks) chunk.add_txn_srcid(b.txn, m);
    pending_[b.txn] = b.relay_marks;
    return;
  }
  for (const fmt::SourceMark& m : b.relay_marks) {
    apply(m);
    chunk.add_srcid(m.source, sources_[m.source]);  // the same chunk as the rows: atomic
  }
}

void Relay::ended(const WriteBatch& b) {
  auto it = pending_.find(b.txn);
  if (it == pending_.end()) return;
  save();
  if (b.commit)
    for (const fmt::SourceMark& m : it->second) apply(m);  // recovery applies its TXN_SRCID at its TXN_END
  pending_.erase(it);
}

void Relay::failed(WriterContext&) {
  if (saved_) {
    sources_ = std::move(saved_->sources);
    pending_ = std::move(saved_->pending);
  }
  saved_.reset();
}

void Relay::take_over(const Relay& from, fmt::ChunkBuilder& chunk) {
  for (const auto& [source, last] : from.sources_) {
    if (this->last(source) >= last) continue;
    save();
    sources_[source] = last;
    chunk.add_srcid(source, last);
  }
}

void Relay::keep(ReplacementFile& out, bool) {
  for (const auto& [source, last] : sources_) out.add_srcid(source, last);
}

}  // namespace q4m
