#include "core/row/index.h"

#include <algorithm>

namespace q4m {

void RowIndex::append(const RowEntry& e) {
  rows_.push_back(e);
  live_++;
  live_bytes_ += e.length;
}

// Ids strictly increase, so the first entry with id >= from is at most (from - first id)
// places in. Ids are mostly contiguous (removed entries stay until maybe_compact), so
// that guess is usually the answer itself, and otherwise it bounds the binary search:
// consumers look up rows near the front, and this keeps that O(1) in a deep queue.
size_t RowIndex::lower_bound(RowId from) const {
  if (rows_.empty() || from <= rows_.front().id) return 0;
  const uint64_t guess = from - rows_.front().id;
  if (guess >= rows_.size()) {
    if (rows_.back().id < from) return rows_.size();
  } else if (rows_[guess].id == from) {
    return static_cast<size_t>(guess);
  }
  const size_t limit = static_cast<size_t>(std::min<uint64_t>(guess, rows_.size()));
  auto it = std::lower_bound(rows_.begin(), rows_.begin() + limit, from,
                             [](const RowEntry& e, RowId id) { return e.id < id; });
  return static_cast<size_t>(it - rows_.begin());
}

RowEntry* RowIndex::find(RowId id) {
  size_t pos = lower_bound(id);
  if (pos == rows_.size() || rows_[pos].id != id || rows_[pos].state == RowState::kRemoved) return nullptr;
  return &rows_[pos];
}

bool RowIndex::remove(RowId id, uint32_t* length) {
  RowEntry* e = find(id);
  if (!e) return false;
  if (length) *length = e->length;
  e->state = RowState::kRemoved;
  e->holder = nullptr;
  live_--;
  live_bytes_ -= e->length;
  tombstones_++;
  maybe_compact();
  return true;
}

void RowIndex::maybe_compact() {
  while (!rows_.empty() && rows_.front().state == RowState::kRemoved) {
    rows_.pop_front();
    tombstones_--;
  }
  while (!rows_.empty() && rows_.back().state == RowState::kRemoved) {
    rows_.pop_back();
    tombstones_--;
  }
  if (tombstones_ > 1024 && tombstones_ > live_) {
    rows_.erase(std::remove_if(rows_.begin(), rows_.end(),
                               [](const RowEntry& e) { return e.state == RowState::kRemoved; }),
                rows_.end());
    tombstones_ = 0;
  }
}

void RowIndex::clear() {
  rows_.clear();
  live_ = live_bytes_ = tombstones_ = 0;
}

const RowEntry* RowIndex::first_live() const {
  for (const RowEntry& e : rows_)
    if (e.state != RowState::kRemoved) return &e;
  return nullptr;
}

}  // namespace q4m
