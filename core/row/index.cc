#include "core/row/index.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace q4m {

// A folded block: where its rows are in the data file, and which of them are live.
//   first_payload, last_payload: offsets of its first and last live rows' payloads
//   first, last: their ids; the block's rows are the file's ROW records in between with ids
//                in [first, last], `slots` of them (positions); dense: slot k has id first + k
//   live_bits: bit k = slot k is live; live, live_bytes: how many, and their payload bytes
struct RowIndex::Cold : ColdRun {
  bool is_live(size_t k) const { return live_bits[k / 64] >> (k % 64) & 1; }
};

struct RowIndex::Block {
  std::unique_ptr<std::deque<RowEntry>> rows;  // hot: one entry per slot (null while cold)
  std::unique_ptr<Cold> cold;  // cold; or, hot after warm(), the cold form it came from until it changes
  uint64_t retry_fold_at = 0;  // changes_ before which fold() is not tried again
  bool unreadable = false;     // warm() failed; not tried again before take_read_error()
  // Hot: runs of its rows (ids first..last) given by a record that ends far past them (a large
  // transaction's TXN_END), and where that record ends: fold() then reads the rows and that
  // record, not every record in between (RowSource::rows with *end known).
  struct FarEnd {
    RowId first, last;
    uint64_t end;
  };
  std::vector<FarEnd> far_ends;
  uint64_t far_end_of(RowId id) const {
    for (const FarEnd& f : far_ends)
      if (id >= f.first && id <= f.last) return f.end;
    return 0;
  }
  bool is_cold() const { return !rows; }
  size_t size() const { return rows ? rows->size() : cold->slots; }
};

RowIndex::RowIndex() = default;
RowIndex::~RowIndex() = default;
RowIndex::RowIndex(RowIndex&&) noexcept = default;
RowIndex& RowIndex::operator=(RowIndex&&) noexcept = default;

RowId RowIndex::first_id(size_t b) const {
  const Block& B = blocks_[b];
  return B.rows ? B.rows->front().id : B.cold->first;
}
RowId RowIndex::last_id(size_t b) const {
  const Block& B = blocks_[b];
  return B.rows ? B.rows->back().id : B.cold->last;
}

void RowIndex::rebuild_ends() const {
  ends_.resize(blocks_.size());
  uint64_t sum = 0;
  for (size_t b = 0; b < blocks_.size(); b++) ends_[b] = sum += blocks_[b].size();
  const_cast<RowIndex*>(this)->popped_ = 0;
  ends_dirty_ = false;
}

size_t RowIndex::block_start(size_t b) const {
  if (ends_dirty_) rebuild_ends();
  return b == 0 ? 0 : static_cast<size_t>(ends_[b - 1] - popped_);
}

size_t RowIndex::block_of(size_t pos, size_t* k) const {
  if (ends_dirty_) rebuild_ends();
  const uint64_t target = pos + popped_;
  const size_t b = static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), target) - ends_.begin());
  *k = static_cast<size_t>(target - (b == 0 ? popped_ : ends_[b - 1]));
  return b;
}

void RowIndex::append(const RowEntry& e, uint64_t record_end) {
  Block* last = blocks_.empty() ? nullptr : &blocks_.back();
  if (!last || last->is_cold() || last->rows->size() >= kBlockRows ||
      (e.offset > last->rows->front().offset ? e.offset - last->rows->front().offset
                                             : last->rows->front().offset - e.offset) > kBlockBytes) {
    if (ends_dirty_) rebuild_ends();
    blocks_.emplace_back();
    blocks_.back().rows = std::make_unique<std::deque<RowEntry>>();
    ends_.push_back(ends_.empty() ? 0 : ends_.back());
    last = &blocks_.back();
  }
  last->rows->push_back(e);
  last->cold.reset();
  if (record_end > e.offset + kFarEnd) {
    std::vector<Block::FarEnd>& f = last->far_ends;
    if (!f.empty() && f.back().end == record_end)
      f.back().last = e.id;
    else
      f.push_back(Block::FarEnd{e.id, e.id, record_end});
  }
  if (!ends_dirty_) ends_.back()++;
  slots_++;
  live_++;
  live_bytes_ += e.length;
  changes_++;
  maybe_fold();
}

// Ids strictly increase, so the first entry with id >= from is at most (from - first id)
// places into its block. Ids are mostly contiguous (removed entries stay until
// maybe_compact), so that guess is usually the answer itself, and otherwise it bounds the
// binary search: consumers look up rows near the front, and this keeps that O(1).
size_t RowIndex::lower_bound(RowId from) const {
  if (blocks_.empty() || from <= first_id(0)) return 0;
  size_t lo = 0, hi = blocks_.size();  // first block whose last id >= from
  if (last_id(0) >= from) {
    hi = 0;
  } else {
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (last_id(mid) < from) lo = mid + 1; else hi = mid;
    }
  }
  const size_t b = hi;
  if (b == blocks_.size()) return slots_;
  const Block& B = blocks_[b];
  if (B.is_cold() && B.cold->dense) return block_start(b) + (from <= B.cold->first ? 0 : from - B.cold->first);
  if (B.is_cold() && !warm(b)) return block_start(b);  // its positions give removed entries
  const std::deque<RowEntry>& rows = *B.rows;
  size_t k = 0;
  if (from > rows.front().id) {
    const uint64_t guess = from - rows.front().id;
    if (guess < rows.size() && rows[guess].id == from) {
      k = static_cast<size_t>(guess);
    } else {
      const size_t limit = static_cast<size_t>(std::min<uint64_t>(guess, rows.size()));
      k = static_cast<size_t>(std::lower_bound(rows.begin(), rows.begin() + limit, from,
                                               [](const RowEntry& e, RowId id) { return e.id < id; }) -
                              rows.begin());
    }
  }
  return block_start(b) + k;
}

const RowEntry& RowIndex::at(size_t pos) const {
  size_t k;
  const size_t b = blocks_.size() == 1 ? (k = pos, 0) : block_of(pos, &k);
  if (blocks_[b].is_cold() && !warm(b)) return unreadable(b, k);
  return (*blocks_[b].rows)[k];
}

const RowEntry& RowIndex::unreadable(size_t b, size_t k) const {
  const Cold& c = *blocks_[b].cold;
  unreadable_ = RowEntry();
  unreadable_.id = std::min<RowId>(c.first + k, c.last);  // ids keep increasing through the block
  unreadable_.state = RowState::kRemoved;
  return unreadable_;
}

Status RowIndex::take_read_error() {
  Status s = std::move(read_error_);
  read_error_ = Status();
  for (Block& B : blocks_) B.unreadable = false;
  return s;
}

RowEntry* RowIndex::find(RowId id) {
  const size_t pos = lower_bound(id);
  if (pos >= slots_) return nullptr;
  RowEntry& e = at(pos);
  if (e.id != id || e.state == RowState::kRemoved) return nullptr;
  return &e;
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
  changes_++;
  maybe_fold();
  return true;
}

void RowIndex::maybe_compact() {
  while (!blocks_.empty() && !blocks_.front().is_cold()) {
    Block& f = blocks_.front();
    bool popped = false;
    while (!f.rows->empty() && f.rows->front().state == RowState::kRemoved) {
      f.rows->pop_front();
      popped_++;
      slots_--;
      tombstones_--;
      popped = true;
    }
    if (popped) f.cold.reset();
    if (!f.rows->empty()) break;
    blocks_.pop_front();
    ends_dirty_ = true;
  }
  while (!blocks_.empty() && !blocks_.back().is_cold()) {
    Block& l = blocks_.back();
    bool popped = false;
    while (!l.rows->empty() && l.rows->back().state == RowState::kRemoved) {
      l.rows->pop_back();
      if (!ends_dirty_) ends_.back()--;
      slots_--;
      tombstones_--;
      popped = true;
    }
    if (popped) l.cold.reset();
    if (!l.rows->empty()) break;
    blocks_.pop_back();
    if (!ends_dirty_) ends_.pop_back();
  }
  if (tombstones_ > 1024 && tombstones_ > live_) {
    for (Block& B : blocks_) {
      if (B.is_cold()) continue;
      const size_t before = B.rows->size();
      B.rows->erase(std::remove_if(B.rows->begin(), B.rows->end(),
                                   [](const RowEntry& e) { return e.state == RowState::kRemoved; }),
                    B.rows->end());
      if (B.rows->size() != before) B.cold.reset();
      slots_ -= before - B.rows->size();
    }
    blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(), [](const Block& B) { return B.size() == 0; }),
                  blocks_.end());
    tombstones_ = 0;
    ends_dirty_ = true;
  }
}

bool RowIndex::warm(size_t b) const {
  Block& B = blocks_[b];
  if (B.unreadable) return false;
  const Cold& c = *B.cold;
  std::vector<RowEntry> got;
  Status s(ErrorCode::kIo, "no data file to read them from");
  for (int attempt = 0; attempt < 3; attempt++) {
    got.clear();
    uint64_t end = c.end;
    if (source_) s = source_->rows(c.first_payload, c.start_id, c.last_payload, c.first, c.last, &got, &end);
    if (s.ok() && got.size() == c.slots) break;
    if (s.ok()) s = Status(ErrorCode::kDamaged, "the file gives back " + std::to_string(got.size()) + " rows, not " + std::to_string(c.slots));
    got.clear();
  }
  if (!s.ok() || got.size() != c.slots || c.slots == 0) {
    // Folding read the same bytes back before it dropped the entries: the file changed or
    // cannot be read any more. No entry can be made up for these rows.
    B.unreadable = true;
    if (read_error_.ok())
      read_error_ = Status(ErrorCode::kDamaged, "cannot read back the rows with ids " + std::to_string(c.first) + " to " +
                                                    std::to_string(c.last) + " (a cold block of the row index): " + s.message());
    return false;
  }
  auto rows = std::make_unique<std::deque<RowEntry>>(got.begin(), got.end());
  for (size_t k = 0; k < c.slots; k++)
    if (!c.is_live(k)) {
      (*rows)[k].state = RowState::kRemoved;
      tombstones_++;
    }
  B.rows = std::move(rows);
  read_back_++;
  return true;
}

void RowIndex::release_read_back(RowId before) {
  if (read_back_ < 4) return;  // a few blocks behind a scan may stay
  read_back_ = 0;
  for (size_t b = kHotFront; b + 1 < blocks_.size(); b++) {
    Block& B = blocks_[b];
    if (B.is_cold() || !B.cold || B.cold->slots != B.rows->size() || last_id(b) >= before) continue;
    const size_t count = blocks_.size();
    fold(b);  // unchanged but for removals: no read
    if (blocks_.size() < count) b--;
  }
}

bool RowIndex::fold(size_t b) {
  Block& B = blocks_[b];
  std::deque<RowEntry>& rows = *B.rows;
  const RowEntry* first = nullptr;
  const RowEntry* last = nullptr;
  size_t n_live = 0;
  uint64_t lowest = ~uint64_t(0), highest = 0;  // payload offsets (a TXN_ROW may be before rows with lower ids)
  RowId start_id = 0;
  for (const RowEntry& e : rows) {
    if (e.state == RowState::kRemoved) continue;
    if (!plain(e)) return false;
    if (!first) first = &e;
    last = &e;
    n_live++;
    if (e.offset < lowest) {
      lowest = e.offset;
      start_id = e.txn_row ? e.id : 0;
    }
    highest = std::max(highest, e.offset);
  }
  const size_t dead = rows.size() - n_live;
  if (n_live == 0) {  // only tombstones: the block goes
    slots_ -= rows.size();
    tombstones_ -= dead;
    blocks_.erase(blocks_.begin() + static_cast<ptrdiff_t>(b));
    ends_dirty_ = true;
    return true;
  }
  if (B.cold && B.cold->slots == rows.size()) {  // read back and not changed since but for removals
    Cold& c = *B.cold;
    std::fill(c.live_bits.begin(), c.live_bits.end(), 0);
    c.live = 0;
    c.live_bytes = 0;
    for (size_t k = 0; k < rows.size(); k++)
      if (rows[k].state != RowState::kRemoved) {
        c.live_bits[k / 64] |= uint64_t(1) << (k % 64);
        c.live++;
        c.live_bytes += rows[k].length;
      }
    tombstones_ -= dead;
    B.rows.reset();
    return true;
  }
  if (highest - lowest > kBlockBytes) return false;
  std::vector<RowEntry> got;
  // The last row's record end, if append() was told it is far: the rows and that record are
  // read, as warm() will (a walk to it would read a large transaction's every record).
  uint64_t end = last->txn_row ? B.far_end_of(last->id) : 0;
  if (end && (!source_->rows(lowest, start_id, last->offset, first->id, last->id, &got, &end).ok() || got.empty())) {
    got.clear();
    end = 0;  // (e.g. another transaction's rows in between end elsewhere): walk to it
  }
  if (got.empty()) {
    if (!source_->rows(lowest, start_id, last->offset, first->id, last->id, &got, &end).ok() || got.empty()) return false;
    // What warm() will read, with the record end now known: past kFarEnd, less (a far TXN_END).
    if (end > last->offset + kFarEnd) got.clear();
    if (got.empty() && (!source_->rows(lowest, start_id, last->offset, first->id, last->id, &got, &end).ok() || got.empty()))
      return false;
  }
  // The file's records must give back exactly the live entries, in order, with others (rows
  // removed before) only in between; ids must increase.
  auto c = std::make_unique<Cold>();
  c->live_bits.assign((got.size() + 63) / 64, 0);
  size_t j = 0;
  auto next_live = [&](size_t from) {
    while (from < rows.size() && rows[from].state == RowState::kRemoved) from++;
    return from;
  };
  size_t at = next_live(0);
  for (size_t k = 0; k < got.size(); k++) {
    if (k > 0 && got[k].id <= got[k - 1].id) return false;
    if (at < rows.size() && got[k].id == rows[at].id) {
      const RowEntry& e = rows[at];
      if (got[k].offset != e.offset || got[k].length != e.length || got[k].time_ms != e.time_ms ||
          got[k].txn_row != e.txn_row)
        return false;
      c->live_bits[k / 64] |= uint64_t(1) << (k % 64);
      c->live_bytes += e.length;
      j++;
      at = next_live(at + 1);
    }
  }
  if (j != n_live) return false;
  c->first_payload = lowest;
  c->last_payload = last->offset;
  c->end = end;
  c->start_id = start_id;
  c->first = first->id;
  c->last = last->id;
  c->slots = static_cast<uint32_t>(got.size());
  c->dense = got.back().id - got.front().id + 1 == got.size();
  c->live = static_cast<uint32_t>(n_live);
  slots_ = slots_ - rows.size() + got.size();
  tombstones_ -= dead;
  if (got.size() != rows.size()) ends_dirty_ = true;
  B.cold = std::move(c);
  B.rows.reset();
  B.far_ends = std::vector<Block::FarEnd>();
  return true;
}

void RowIndex::maybe_fold() {
  if (!source_ || changes_ < next_fold_) return;
  next_fold_ = changes_ + (kBlockRows + 3) / 4;
  for (size_t b = kHotFront; b + 1 < blocks_.size(); b++) {
    Block& B = blocks_[b];
    if (B.is_cold() || B.retry_fold_at > changes_) continue;
    const size_t before = blocks_.size();
    if (!fold(b)) B.retry_fold_at = changes_ + kBlockRows;
    if (blocks_.size() < before) b--;  // the block went
  }
}

void RowIndex::fold_now() {
  if (!source_) return;
  for (size_t b = kHotFront; b + 1 < blocks_.size(); b++) {
    if (blocks_[b].is_cold()) continue;
    const size_t before = blocks_.size();
    fold(b);
    if (blocks_.size() < before) b--;
  }
}

bool RowIndex::forget_cold_copies() {
  bool all = true;
  for (size_t b = 0; b < blocks_.size(); b++) {
    if (blocks_[b].is_cold() && !warm(b)) {  // cold blocks must be read back before
      all = false;
      continue;
    }
    blocks_[b].cold.reset();
  }
  return all;
}

void RowIndex::clear() {
  blocks_.clear();
  ends_.clear();
  ends_dirty_ = false;
  popped_ = 0;
  slots_ = 0;
  live_ = live_bytes_ = tombstones_ = 0;
}

const RowEntry* RowIndex::first_live() const {
  for (size_t b = 0; b < blocks_.size(); b++) {
    if (blocks_[b].is_cold() && !warm(b)) continue;  // read_failed() says so
    for (const RowEntry& e : *blocks_[b].rows)
      if (e.state != RowState::kRemoved) return &e;
  }
  return nullptr;
}

uint64_t RowIndex::cold_rows() const {
  uint64_t n = 0;
  for (const Block& B : blocks_)
    if (B.is_cold()) n += B.cold->live;
  return n;
}

void RowIndex::for_each_run(const std::function<void(const RowEntry&)>& row,
                            const std::function<void(const ColdRun&)>& cold) const {
  for (const Block& B : blocks_) {
    if (B.is_cold()) {
      cold(*B.cold);
      continue;
    }
    for (const RowEntry& e : *B.rows)
      if (e.state != RowState::kRemoved) row(e);
  }
}

bool RowIndex::append_cold(ColdRun run) {
  if (run.slots == 0 || run.live == 0 || run.live > run.slots || run.first > run.last ||
      run.last - run.first + 1 < run.slots || run.first_payload > run.last_payload ||
      (run.end != 0 && run.end <= run.last_payload) ||
      run.live_bits.size() != (run.slots + 63) / 64 || (run.dense && run.last - run.first + 1 != run.slots) ||
      (!blocks_.empty() && last_id(blocks_.size() - 1) >= run.first))
    return false;
  uint64_t live = 0;
  for (uint64_t w : run.live_bits) live += static_cast<uint64_t>(__builtin_popcountll(w));
  if (live != run.live || (run.slots % 64 && run.live_bits.back() >> (run.slots % 64)))
    return false;
  if (ends_dirty_) rebuild_ends();
  blocks_.emplace_back();
  auto c = std::make_unique<Cold>();
  static_cast<ColdRun&>(*c) = std::move(run);
  live_ += c->live;
  live_bytes_ += c->live_bytes;
  slots_ += c->slots;
  ends_.push_back((ends_.empty() ? 0 : ends_.back()) + c->slots);
  blocks_.back().cold = std::move(c);
  return true;
}

// libstdc++'s deque: 512-byte nodes, a map of node pointers (at least 8). Every allocation
// also pays a malloc header.
namespace {
constexpr uint64_t kMalloc = 16;
template <typename T>
uint64_t deque_bytes(size_t n) {
  const uint64_t per = sizeof(T) < 512 ? 512 / sizeof(T) : 1;
  const uint64_t nodes = n / per + 1;
  return nodes * (per * sizeof(T) + kMalloc) + std::max<uint64_t>(8, nodes + 2) * sizeof(void*) + kMalloc;
}
}  // namespace

uint64_t RowIndex::memory_bytes() const {
  uint64_t n = sizeof(*this) + deque_bytes<Block>(blocks_.size()) + ends_.capacity() * sizeof(uint64_t) + kMalloc;
  for (const Block& B : blocks_) {
    if (B.rows) n += sizeof(std::deque<RowEntry>) + kMalloc + deque_bytes<RowEntry>(B.rows->size());
    if (B.cold) n += sizeof(Cold) + kMalloc + B.cold->live_bits.capacity() * sizeof(uint64_t) + kMalloc;
    if (B.far_ends.capacity()) n += B.far_ends.capacity() * sizeof(Block::FarEnd) + kMalloc;
  }
  return n;
}

}  // namespace q4m
