// RowIndex: the live rows of one table in row-id order, with where each payload is in the
// data file and who (if anyone) holds it. Not thread-safe: it lives inside the table's
// Guarded state.
//
// Removed rows stay as tombstones and are dropped lazily (from the front at once,
// elsewhere when they outnumber live entries), so removal is O(log n).
//
// Memory (docs/architecture.md, "The row index in memory"): the rows are kept in blocks of up
// to kBlockRows. A block holds a RowEntry per row (40 bytes) while it is *hot*; a block away
// from the front and the tail whose live rows are all plain (kFree, no holder, never handed
// out, not grouped) is *folded* cold: it keeps only where its rows are in the data file and
// one bit per row (removed or not), and reads its entries back from the file (RowSource)
// when a position, find() or remove() reaches into it. Positions count the rows of cold
// blocks too, so callers see one sequence either way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/row/holder.h"
#include "core/row/lifecycle.h"
#include "core/row/row_id.h"
#include "core/util/status.h"

namespace q4m {

struct RowEntry {
  RowEntry() : grouped(false), delivering(false), txn_row(false) {}
  RowId id = 0;
  uint64_t offset = 0;   // of the payload in the current data file
  uint64_t time_ms = 0;  // insert time (wall clock)
  uint32_t length = 0;
  RowState state = RowState::kFree;
  bool grouped : 1;     // in a message group (MESSAGE_GROUP_COLUMN not NULL): policy/message_groups.h
  // Held (kOwned, or kClaimed by its owner's end) in a delivery that `deliveries` counts
  // already: a crash ends it without counting it (Table::kept_across_restart).
  bool delivering : 1;
  // Its record is a TXN_ROW (committed in two phases): the checksum after its payload covers
  // id 0, its id is its TXN_END's to give (core/file/row_check.h RowLocation::id_less).
  bool txn_row : 1;
  uint16_t deliveries = 0;  // times handed out (saturates); the file keeps it across restarts
  const Holder* holder = nullptr;  // kOwned / kClaimed
};
static_assert(sizeof(RowEntry) <= 40, "grouped and deliveries live in padding: a row's index entry stays 40 bytes");

// A plain row: all the file's ROW record says of it (a cold block keeps nothing else).
inline bool plain(const RowEntry& e) {
  return e.state == RowState::kFree && !e.holder && e.deliveries == 0 && !e.grouped && !e.delivering;
}

// Reads back the rows of a cold block from the table's data file (core/file/row_source.h).
class RowSource {
 public:
  virtual ~RowSource() = default;
  // Every row whose id is in [first, last], in id order, as plain entries, from the records
  // that start at the one whose payload is at first_payload: a ROW record gives its row with
  // its id; a TXN_ROW gives its row at its transaction's TXN_END, with the ids the END gives
  // (first_rowid on). The walk ends at the record that gives row `last` (whose payload is at
  // last_payload); *end, if not 0, is where that record ends (known: read no more), and is
  // set to it. start_id: the id of the row whose payload is at first_payload if that is a
  // TXN_ROW (its transaction's rows before it are not read: their TXN_END's first id is not
  // this one's), else 0. An error (naming the file and the offset) if the bytes cannot be
  // read or are not such records (then *out is unspecified).
  virtual Status rows(uint64_t first_payload, RowId start_id, uint64_t last_payload, RowId first, RowId last,
                      std::vector<RowEntry>* out, uint64_t* end) const = 0;
};

// Tests build the core with a tiny block (-DQ4M_INDEX_BLOCK_ROWS=4) so that every table test
// folds and reads back blocks.
#ifndef Q4M_INDEX_BLOCK_ROWS
#define Q4M_INDEX_BLOCK_ROWS 4096
#endif

class RowIndex {
 public:
  static constexpr size_t kBlockRows = Q4M_INDEX_BLOCK_ROWS;
  static constexpr uint64_t kBlockBytes = 4u << 20;  // a cold block's span of the file, at most
  // A cold block whose last row's record ends further than this past its payload (a large
  // transaction's TXN_END) reads its rows, then that record alone (FileRowSource).
  static constexpr uint64_t kFarEnd = 256u << 10;
  static constexpr size_t kHotFront = 2;  // blocks at the front never folded (consumers take there)

  RowIndex();
  ~RowIndex();
  RowIndex(RowIndex&&) noexcept;
  RowIndex& operator=(RowIndex&&) noexcept;

  // Where cold blocks read their rows back from; null (the default) folds nothing. A new
  // file (compaction) must come with forget_cold_copies() once every offset was rewritten.
  void set_source(std::shared_ptr<const RowSource> source) { source_ = std::move(source); }
  // The blocks read back keep no copy of their cold form (their offsets changed). false if
  // a cold block could not be read back first (read_failed()).
  bool forget_cold_copies();

  // Row ids must be appended in increasing order. record_end, if known: where the record that
  // gives the row ends (a TXN_ROW's TXN_END, far past it in a large transaction): folding the
  // row's block then reads its rows and that record only (RowSource::rows).
  void append(const RowEntry& e, uint64_t record_end = 0);
  // The entry for `id` (null if absent or removed). Stays valid until the next
  // append/remove/compaction of the index.
  RowEntry* find(RowId id);
  // Marks removed; returns false if absent. *bytes receives the row's length.
  bool remove(RowId id, uint32_t* length = nullptr);
  void clear();

  // Iteration over live entries with id >= from (positional cursor). at() of a position in
  // a cold block reads the block back (its entries then stay until the next append/remove).
  // A cold block the file cannot give back (read error, bytes changed) is never made up: its
  // positions give removed entries, find() null, and read_failed() says so until
  // take_read_error(), which the table's take, scan or removal turns into its error.
  size_t lower_bound(RowId from) const;
  size_t end_pos() const { return slots_; }
  RowEntry& at(size_t pos) { return const_cast<RowEntry&>(static_cast<const RowIndex*>(this)->at(pos)); }
  const RowEntry& at(size_t pos) const;
  const RowEntry* first_live() const;
  bool read_failed() const { return !read_error_.ok(); }
  // The first read-back failure since the last call (kDamaged, naming the file and rows); the
  // blocks that failed are tried again by the next access.
  Status take_read_error();

  uint64_t live() const { return live_; }
  uint64_t live_bytes() const { return live_bytes_; }  // sum of payload lengths
  // Heap and object bytes the index holds: blocks, entries (with the containers' own
  // allocation granularity and a malloc header per allocation), cold blocks' bitmaps.
  uint64_t memory_bytes() const;
  uint64_t cold_rows() const;  // live rows in cold blocks (for tests and stats)
  // A cold block as the index snapshot keeps it (core/file/index_snapshot.cc).
  struct ColdRun {
    uint64_t first_payload = 0, last_payload = 0;  // the lowest payload offset; the last row's
    uint64_t end = 0;  // where the record giving the last row ends (0: not known, e.g. snapshot v4)
    RowId start_id = 0;  // the id of the row at first_payload if a TXN_ROW's (RowSource::rows)
    RowId first = 0, last = 0;
    uint32_t slots = 0;
    bool dense = false;
    uint32_t live = 0;
    uint64_t live_bytes = 0;
    std::vector<uint64_t> live_bits;  // (slots + 63) / 64 words
  };
  // Every live entry of the hot blocks (row) and every cold block (cold), in id order,
  // without reading any block back.
  void for_each_run(const std::function<void(const RowEntry&)>& row,
                    const std::function<void(const ColdRun&)>& cold) const;
  // Appends a cold block (its ids above every id in the index); false if it is not
  // consistent (bits, counts, ids), then nothing changed.
  bool append_cold(ColdRun run);
  // Folds back, without reading the file, the blocks read back since that hold only ids below
  // `before` and were changed by removals only: a scan that passed them (takes.cc) keeps a few
  // blocks in memory, not the whole backlog. No entry of theirs may be held across the call.
  void release_read_back(RowId before);
  // Folds every block that may be folded now (tests; the index does it by itself as rows come
  // and go).
  void fold_now();

 private:
  struct Cold;
  struct Block;
  size_t block_of(size_t pos, size_t* k) const;  // block holding position pos, and its index there
  size_t block_start(size_t b) const;
  void rebuild_ends() const;
  bool warm(size_t b) const;        // reads a cold block back; false if the file failed us
  const RowEntry& unreadable(size_t b, size_t k) const;  // what at() gives for a block warm() failed
  bool fold(size_t b);              // folds a hot block; false if it must stay hot
  void maybe_compact();
  void maybe_fold();
  RowId first_id(size_t b) const;
  RowId last_id(size_t b) const;

  mutable std::deque<Block> blocks_;
  mutable std::vector<uint64_t> ends_;  // ends_[b]: slots up to and including block b, from the origin
  mutable bool ends_dirty_ = false;
  uint64_t popped_ = 0;  // slots dropped from the front of block 0 since ends_ was built
  size_t slots_ = 0;
  uint64_t live_ = 0;
  uint64_t live_bytes_ = 0;
  mutable uint64_t tombstones_ = 0;  // removed entries in hot blocks
  uint64_t changes_ = 0;             // appends + removals, to pace maybe_fold()
  uint64_t next_fold_ = 0;
  mutable uint32_t read_back_ = 0;  // blocks warm() read back since release_read_back() last ran
  std::shared_ptr<const RowSource> source_;
  mutable Status read_error_;
  mutable RowEntry unreadable_;
};

}  // namespace q4m
