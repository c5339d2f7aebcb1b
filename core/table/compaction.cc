// Compaction: rewrites the live rows (ids, insert times, payloads), the relay sources
// and META into "<path>.tmp", then renames it over the data file.
//
// Concurrent (settings().use_concurrent_compaction): phase 1 copies the rows that
// existed when it started without holding the writer turn, so INSERTs and queue_end()
// carry on; phase 2 takes the turn and copies only what changed meanwhile: rows
// appended since (larger ids), a REMOVE record for copied rows removed since, the
// current relay sources and a final META. Otherwise the turn is held throughout.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/file/block_reader.h"
#include "core/file/replacement_file.h"
#include "core/file/row_check.h"
#include "core/table/table.h"
#include "core/util/settings.h"

namespace q4m {
namespace {

struct Copied {
  RowId id;
  uint64_t offset;  // of the payload in the new file
};

constexpr size_t kBatch = 4096;  // rows collected per state-lock hold

}  // namespace

// Copies the live rows with after < id <= upto, a batch per state-lock hold. Each row is
// checked as it is read and written with the checksum it must match (stored after it, or
// computed at open for a row of an older format), never one computed from the bytes read: a
// row whose bytes were damaged on disk is copied, so it is not lost, and stays damaged in the
// new file, where every read still fails on it. Such rows go to *damaged.
template <typename State>
static Status copy_rows(Guarded<State>& state, ReplacementFile& out, RowId after, RowId upto,
                        uint64_t flush_bytes, std::vector<Copied>* copied, std::vector<RowId>* damaged) {
  struct Row {
    RowLocation at;
    uint64_t time_ms;
  };
  std::vector<Row> batch;
  std::shared_ptr<DataFile> file;
  for (;;) {
    batch.clear();
    {
      auto st = state.lock();
      file = st->file;
      for (size_t p = st->index.lower_bound(after + 1); p < st->index.end_pos() && batch.size() < kBatch; p++) {
        const RowEntry& e = st->index.at(p);
        if (e.id > upto) break;
        if (e.state != RowState::kRemoved) batch.push_back(Row{st->locate(e), e.time_ms});
      }
      if (st->index.read_failed()) return st->index.take_read_error();  // no file missing rows
    }
    if (batch.empty()) return Status::Ok();
    // Rows are in id order, which is file order: read them a block at a time, never past
    // the batch's last row (bytes known to be written, which never change).
    uint64_t limit = 0;
    for (const Row& r : batch) limit = std::max(limit, r.at.offset + r.at.disk_length());
    BlockReader reader(*file, limit);
    for (const Row& r : batch) {
      const unsigned char* p = nullptr;
      Status s = reader.get(r.at.offset, r.at.disk_length(), &p);
      if (!s.ok()) return s;
      const char* bytes = reinterpret_cast<const char*>(p);
      const bool ok = check_row(r.at, file->path(), bytes).ok();
      if (!ok) damaged->push_back(r.at.id);
      std::string_view payload(bytes, r.at.length);
      // A TXN_ROW's checksum covers id 0: the ROW gets one covering its id (one that fails, if
      // the bytes did).
      uint32_t sum = r.at.expected(bytes);
      if (r.at.id_less) sum = ok ? fmt::row_checksum(r.at.id, payload) : ~fmt::row_checksum(r.at.id, payload);
      copied->push_back(Copied{r.at.id, out.add_row(r.at.id, r.time_ms, payload, sum)});
      s = out.flush_if_over(flush_bytes);
      if (!s.ok()) return s;
    }
    after = batch.back().at.id;
  }
}

// History rows (HISTORY_RETENTION) are copied as HISTORY_ROW records, payload and checksum as
// they are; their new offsets go to *moved.
static Status copy_history_rows(const DataFile& file, ReplacementFile& out, const std::vector<EndedRow>& rows,
                                uint64_t flush_bytes, std::unordered_map<RowId, uint64_t>* moved) {
  std::string bytes;
  for (const EndedRow& r : rows) {
    const RowLocation at{r.id, r.offset, r.length, r.stored, r.known, r.id_less};
    Status s = file.read(at.offset, at.disk_length(), &bytes);
    if (!s.ok()) return s;
    const fmt::HistoryEntry end{r.id, r.end_ms, static_cast<uint8_t>(r.kind), r.deliveries};
    const std::string_view payload(bytes.data(), r.length);
    uint32_t sum = at.expected(bytes.data());
    if (at.id_less)  // a TXN_ROW's covers id 0: the HISTORY_ROW's covers its id (and fails if its bytes did)
      sum = check_row(at, file.path(), bytes.data()).ok() ? fmt::row_checksum(r.id, payload) : ~fmt::row_checksum(r.id, payload);
    (*moved)[r.id] = out.add_history_row(r.id, r.time_ms, payload, sum, end);
    s = out.flush_if_over(flush_bytes);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status Table::compact() {
  std::lock_guard<std::mutex> one(compaction_mu_);
  return compact_now();
}

void Table::maybe_auto_compact() {
  auto due = [this] {
    const StorageSettings& cfg = settings();
    uint64_t file = file_bytes_.load();
    if (file < cfg.compaction_min_file_bytes.load(std::memory_order_relaxed)) return false;
    uint64_t live =
        fmt::kFileHeaderSize + live_bytes_.load() + rows_.load() * (fmt::kRowHeaderSize + fmt::kRowChecksumSize);
    // History rows are kept, not reclaimable.
    live += history_bytes_.load() +
            history_rows_.load() * (fmt::kRowHeaderSize + fmt::kRowChecksumSize + fmt::kHistoryRowEndSize);
    uint64_t reclaimable = file > live ? file - live : 0;
    int percent = std::max(0, cfg.compaction_removed_percent.load(std::memory_order_relaxed));
    return reclaimable * 100 >= static_cast<uint64_t>(percent) * file;
  };
  if (dropped_.load() || !due()) return;
  std::unique_lock<std::mutex> one(compaction_mu_, std::try_to_lock);
  if (!one.owns_lock() || !due()) return;  // someone else is at it / just did it
  compact_now();  // a failure leaves the old file in place; a later commit retries
}

Status Table::compact_now() {
  const StorageSettings& cfg = settings();
  const bool concurrent = cfg.use_concurrent_compaction.load();
  // Phase 1 never blocks writers, so "bytes copied between serving writers" becomes
  // the size of each write to the new file.
  const uint64_t flush_bytes = std::max<uint64_t>(64u << 10, cfg.concurrent_compaction_interval.load());
  // The replaced file, closed only after every lock below is released: closing the last
  // descriptor of a large unlinked file frees its blocks, which takes a while.
  std::shared_ptr<DataFile> retired;
  std::unique_ptr<CommitPipeline::Turn> turn;
  if (!concurrent) turn.reset(new CommitPipeline::Turn(pipeline_));

  // Snapshot point: holding writer_ means no commit is between write and publish.
  uint64_t generation;
  RowId snapshot_last = 0;
  fmt::Meta start;
  std::string path;
  std::vector<EndedRow> history;  // the history rows at the start (phase 1 copies them)
  std::shared_ptr<DataFile> history_file;
  {
    auto w = writer_.lock();
    if (dropped_.load()) return dropped_status();
    if (!w->broken.ok()) return w->broken;
    generation = w->generation;
    start = meta_now(*w);
    auto st = state_.lock();
    if (st->index.end_pos() > 0) snapshot_last = st->index.at(st->index.end_pos() - 1).id;
    path = this->path();
    if (st->history_ms) {
      expire_history(*st, now_ms());  // what is past the retention is not copied
      history.assign(st->ended.rows().begin(), st->ended.rows().end());
      history_file = st->file;
    }
  }
  ReplacementFile out;
  Status s = out.create(path);
  if (!s.ok()) return s;
  out.add_meta(start);  // next_rowid first: ids stay monotonic whatever follows
  std::vector<Copied> copied;
  std::vector<RowId> damaged;  // copied as they are; set aside once the new file is in place
  s = copy_rows(state_, out, 0, snapshot_last, flush_bytes, &copied, &damaged);  // phase 1
  if (!s.ok()) return s;
  std::unordered_map<RowId, uint64_t> history_moved;  // history row -> its payload's new offset
  if (!history.empty()) s = copy_history_rows(*history_file, out, history, flush_bytes, &history_moved);
  if (!s.ok()) return s;
  // Sync phase 1's bytes while writers still run: phase 2 then syncs only its delta.
  if (concurrent) s = out.sync_written();
  if (!s.ok()) return s;

  if (!turn) turn.reset(new CommitPipeline::Turn(pipeline_));
  auto w = writer_.lock();
  if (dropped_.load()) return dropped_status();
  if (w->generation != generation) return Status::Ok();  // truncated/renamed meanwhile: nothing to do
  if (!w->broken.ok()) return w->broken;
  // Phase 2. With writer_ held the set of rows is frozen (only owners change).
  s = copy_rows(state_, out, snapshot_last, ~RowId(0), flush_bytes, &copied, &damaged);
  if (!s.ok()) return s;
  std::vector<RowId> gone;
  std::vector<fmt::ReturnedRow> returned;  // delivery counts and retry delays, as of now
  uint64_t live_copied = 0, live_now = 0;
  for (size_t i = 0; i < copied.size(); i += kBatch) {
    auto st = state_.lock();
    for (size_t k = i; k < std::min(copied.size(), i + kBatch); k++) {
      const RowEntry* e = st->index.find(copied[k].id);
      if (!e) {
        gone.push_back(copied[k].id);
        continue;
      }
      live_copied++;
      fmt::ReturnedRow r;
      if (kept_across_restart(*st, *e, &r)) returned.push_back(r);
    }
    live_now = st->index.live();
  }
  if (copied.empty()) live_now = state_.lock()->index.live();
  if (live_copied != live_now)  // never expected; refuse to install a file missing rows
    return Status(ErrorCode::kIo, "file " + path + ": compaction copied " + std::to_string(live_copied) +
                                      " of " + std::to_string(live_now) + " rows; not installed");
  // History: rows that ended since phase 1 read them were copied as rows (a HISTORY record
  // before the REMOVE of `gone` says how they ended); other rows that ended meanwhile (inserted
  // and ended during phase 1) are copied as history rows now.
  {
    std::vector<EndedRow> since;
    {
      auto st = state_.lock();
      if (st->history_ms) {
        expire_history(*st, now_ms());
        for (const EndedRow& r : st->ended.rows())
          if (!history_moved.count(r.id)) since.push_back(r);
        history_file = st->file;
      }
    }
    std::vector<fmt::HistoryEntry> ended;
    std::vector<EndedRow> uncopied;
    for (const EndedRow& r : since) {
      auto it = std::lower_bound(copied.begin(), copied.end(), r.id,
                                 [](const Copied& c, RowId id) { return c.id < id; });
      if (it != copied.end() && it->id == r.id) {
        ended.push_back(fmt::HistoryEntry{r.id, r.end_ms, static_cast<uint8_t>(r.kind), r.deliveries});
        history_moved[r.id] = it->offset;
      } else {
        uncopied.push_back(r);
      }
    }
    if (!uncopied.empty()) s = copy_history_rows(*history_file, out, uncopied, flush_bytes, &history_moved);
    if (!s.ok()) return s;
    if (!ended.empty()) out.add_history(ended);
  }
  if (!gone.empty()) out.add_remove(gone);
  // Returns recorded in the old file meanwhile are in memory; later ones go to the new file.
  if (!returned.empty()) out.add_returns(returned);
  w->policies.each([&](auto& p) { p.keep(out, false); });  // relay sources, the dedup window
  // Subscriptions and the live rows they ended (commits wait for the writer lock held here).
  subscriptions_.keep(out, [&](RowId id) { return state_.lock()->index.find(id) != nullptr; });
  // Prepared parts (frozen: they change only through commits): rewritten whole, new offsets.
  std::map<uint64_t, std::vector<uint64_t>> part_offsets;
  {
    std::map<uint64_t, State::Prepared> parts;
    std::shared_ptr<DataFile> file;
    {
      auto st = state_.lock();
      file = st->file;
      for (const auto& [id, p] : st->prepared) parts[id] = State::Prepared{p.xid, p.rows, p.removals, nullptr, p.relay, p.asked, {}};
    }
    for (const auto& [id, p] : parts) {
      std::vector<uint64_t>& offsets = part_offsets[id];
      std::string bytes;
      for (const RowEntry& e : p.rows) {  // with the checksum they were written with
        s = file->read(e.offset, e.length + fmt::kRowChecksumSize, &bytes);
        if (!s.ok()) return s;
        offsets.push_back(out.add_txn_row(id, e.time_ms, std::string_view(bytes.data(), e.length),
                                          fmt::get_u32(bytes.data() + e.length)));
      }
      if (!p.removals.empty()) out.add_txn_remove(id, p.removals);
      if (!p.asked.empty()) out.add_txn_ask(id, p.asked);
      for (const fmt::SourceMark& m : p.relay) out.add_txn_srcid(id, m);
      subscriptions_.keep_part(out, id);  // a subscription's ends it makes (TXN_SUB_REMOVE)
      out.add_txn_prepare(id, p.xid);
    }
  }
  out.add_meta(meta_now(*w));  // authoritative counters as of the end of the copy

  s = invalidate_snapshot(*w);
  if (!s.ok()) return s;
  std::shared_ptr<DataFile> fresh;
  s = out.install(&fresh);
  if (!fresh) return s;
  if (!s.ok()) w->broken = s;  // renamed, but not durably: stop appending
  {
    auto st = state_.lock();
    // Both sequences are in id order: one merge walk assigns the new offsets.
    size_t i = 0;
    for (size_t p = 0; p < st->index.end_pos(); p++) {
      RowEntry& e = st->index.at(p);
      if (e.state == RowState::kRemoved) continue;
      while (copied[i].id < e.id) i++;  // every live row was copied (checked above)
      e.offset = copied[i].offset;
      e.txn_row = false;  // a ROW record now
    }
    // (Phase 2 read every block back a moment ago; should one fail now, its rows' offsets are
    // the old file's: the table writes nothing more.)
    if (!st->index.forget_cold_copies()) w->broken = st->index.take_read_error();  // their offsets were the old file's
    for (auto& [id, p] : st->prepared) {
      for (size_t k = 0; k < p.rows.size(); k++) p.rows[k].offset = part_offsets[id][k];
      p.unwritten = false;  // the new file has its records (above)
    }
    w->unwritten.clear();
    // History rows now in the new file, their checksums after their payloads.
    std::deque<EndedRow>& ended = st->ended.rows();
    std::deque<EndedRow> kept;
    for (EndedRow& r : ended) {
      auto it = history_moved.find(r.id);
      if (it == history_moved.end()) continue;  // (none: the writer turn is held)
      r.offset = it->second;
      r.stored = true;
      r.id_less = false;
      kept.push_back(r);
    }
    if (kept.size() != ended.size()) {
      st->ended.clear();
      for (const EndedRow& r : kept) st->ended.add(r);
    } else {
      ended.swap(kept);
    }
    note_history_size(*st);
    retired = st->file;
    st->install_file(fresh);
    st->known_sums.clear();  // every row now has its checksum on disk
    set_aside(*st, damaged);
  }
  w->file = fresh;
  w->tail_flagged = false;  // the copy's chunks are synced and not flagged
  file_bytes_.store(fresh->size());
  counters_.compactions.add();
  global_stats().compactions.add();
  return s;
}

}  // namespace q4m
