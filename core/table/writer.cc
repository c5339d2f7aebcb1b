// The group-commit leader's work (CommitPipeline hands it a batch of requests): admission by
// the writer policies, one chunk of records, one write and one sync, then publishing the
// result into the index, where rows are handed to waiters only once they are durable.
#include <algorithm>
#include <numeric>

#include "core/table/commit_gate.h"
#include "core/table/redo.h"
#include "core/table/snapshots.h"
#include "core/table/table.h"
#include "core/util/blocking.h"
#include "core/util/settings.h"

namespace q4m {

namespace {

// A copy's rows that keep their ids (RowHistory::id) must come in increasing order, from the
// table's next id on: else b.status says why and none of the request's rows is written.
bool kept_ids_fit(WriteBatch& b, IdSequence ids) {
  for (size_t i = 0; i < b.rows->size(); i++) {
    const RowId id = b.history[i].id;
    if (id == 0) {
      ids.give(b.asked ? b.asked[i] : 0);
      continue;
    }
    if (id < ids.next) {
      b.status = Status(ErrorCode::kInvalid, "copied row id " + std::to_string(id) +
                                                 " is below the table's next row id " + std::to_string(ids.next) +
                                                 ": ids must increase");
      return false;
    }
    ids.next = id + 1;
  }
  return true;
}

// A copy's deliveries and retry delays, as a RETURN record under the rows' ids in the rows'
// own chunk: a crash keeps both or neither.
void add_kept_histories(fmt::ChunkBuilder& chunk, WriteBatch& b) {
  b.histories_kept.clear();
  for (size_t k = 0; k < b.ids.size(); k++) {
    const RowHistory& h = b.history[b.admitted[k]];  // a copy: every row is written
    if (h.deliveries > 0 || h.due_ms > 0) b.histories_kept.push_back(fmt::ReturnedRow{b.ids[k], h.deliveries, h.due_ms});
  }
  if (!b.histories_kept.empty()) chunk.add_returns(b.histories_kept.data(), b.histories_kept.size());
}

// A prepared part's rows that ask for ids: one TXN_ASK record for its admitted rows, which the
// part keeps too (b.asked_kept).
void add_asked_ids(fmt::ChunkBuilder& chunk, WriteBatch& b) {
  b.asked_kept.clear();
  for (size_t i : b.admitted) b.asked_kept.push_back(b.asked[i]);
  if (std::none_of(b.asked_kept.begin(), b.asked_kept.end(), [](RowId id) { return id != 0; })) {
    b.asked_kept.clear();
    return;
  }
  chunk.add_txn_ask(b.txn, b.asked_kept.data(), b.asked_kept.size());
}

bool removes(const CommitRequest* r) { return r->batch.removal_count > 0; }

// kInvalid unless relayed source row ids are positive and increase.
Status check_relayed_ids(const RowId* ids, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (ids[i] == 0 || (i > 0 && ids[i] <= ids[i - 1]))
      return Status(ErrorCode::kInvalid, "relayed source row ids must be positive and increase; got " +
                                             std::to_string(ids[i]) + " at position " + std::to_string(i + 1));
  }
  return Status::Ok();
}

}  // namespace

Status Table::commit(CommitRequest* req) {
  // A one-phase change of the rows passes the server's backup first (commit_gate.h); a
  // prepare is not a commit, and an end waited in the server.
  const WriteBatch& b = req->batch;
  CommitGate* gate = b.phase == WriteBatch::Phase::kNone && (b.inserts() || removes(req)) ? CommitGate::get() : nullptr;
  void* pass = nullptr;
  if (gate) {
    if (Status s = gate->enter(&pass); !s.ok()) return Status(s.code(), "file " + path() + ": " + s.message());
  }
  Status s = after_commit(req, pipeline_.commit(req));
  if (gate) gate->leave(pass);
  return s;
}

Status Table::finish(CommitRequest* req) { return after_commit(req, pipeline_.finish(req)); }

Status Table::after_commit(CommitRequest* req, bool led) {
  // Not after a return only: the reaper records those, and must not stop for a compaction.
  if (led && (req->batch.inserts() || removes(req))) maybe_auto_compact();
  return req->batch.status;
}

void Table::write_batch(const CommitRequest* leader, std::vector<CommitRequest*>& batch) {
  auto w = writer_.lock();
  // Moved first: an owner's end must reach the table its rows moved to (takeover.cc), even
  // once this one is dropped (an end on a dropped table looks like success).
  Status fail = successor_raw_.load() ? moved_status() : dropped_.load() ? dropped_status() : w->broken;
  if (!fail.ok()) {
    for (CommitRequest* r : batch) r->batch.status = fail;
    return;
  }
  WriterContext ctx;
  ctx.now_ms = now_ms();
  ctx.rows = rows_.load() + pending_rows_.load();  // a prepared part's rows will come
  ctx.counters = &counters_;
  const SyncMode mode = settings().sync();
  bool sync = mode != SyncMode::kNone &&
              std::any_of(batch.begin(), batch.end(), [](const CommitRequest* r) { return r->batch.sync; });
  IdSequence ids = w->ids;
  w->buffer.clear();
  // Flagged `unsynced` (docs/file-format.md) unless every chunk before it is durable: a power
  // cut may then keep it and lose them, and recovery must cut them as a lost tail, not call
  // the gap corruption. Whether a sync follows this chunk itself does not matter: unflagged,
  // it says that what precedes it was synced, so a bad chunk before it is damage. (It used
  // to be flagged whenever no sync followed it: with the binary log on every statement's
  // commit record is written so, which flagged every chunk and turned a damaged middle chunk
  // into a "torn tail" that cut every later chunk, issue 40.)
  const bool flagged = mode == SyncMode::kNone || w->file->has_unsynced_appends();
  fmt::ChunkBuilder chunk(&w->buffer, flagged);
  bool adds_rows = false;  // else the chunk may use the room kept for removals (DataFile::Room)
  w->policies.each([&](auto& p) { p.begin_batch(ctx); });
  if (history_ms_.load(std::memory_order_relaxed)) note_history(batch, ctx.now_ms);
  std::vector<uint64_t> unwritten_emitted;  // back into w->unwritten if the write fails
  for (CommitRequest* r : batch) {
    WriteBatch& b = r->batch;
    if (b.id_floor > ids.floor) {
      ids.floor = b.id_floor;
      chunk.add_id_floor(b.id_floor);
    }
    if (b.phase == WriteBatch::Phase::kEnd) {  // its admission ran at prepare
      if (b.part_removals && w->unwritten.erase(b.txn)) {  // prepared without a write (prepared.cc)
        chunk.add_txn_remove(b.txn, b.part_removals->data(), b.part_removals->size());
        chunk.add_txn_prepare(b.txn, b.xid);
        unwritten_emitted.push_back(b.txn);
      }
      if (b.commit) {
        b.first_rowid = ids.next;  // recovery gives the same ids from it (TXN_ASK, ID_FLOOR)
        b.ids.clear();
        for (size_t k = 0; k < b.end_rows; k++) b.ids.push_back(ids.give(b.asked ? b.asked[k] : 0));
        w->policies.each([&](auto& p) { p.committed(b); });
      } else {
        w->policies.each([&](auto& p) { p.withdraw(b); });
      }
      if (b.commit && !b.ended.empty()) chunk.add_history(b.ended.data(), b.ended.size());
      chunk.add_txn_end(b.txn, b.commit, b.first_rowid);
      b.txn_end_end = w->buffer.size();  // its rows' far record (RowIndex::append)
      if (b.return_count) chunk.add_returns(b.returns, b.return_count);
      continue;
    }
    const bool prepare = b.phase == WriteBatch::Phase::kPrepare;
    RedoCapture redo(chunk, w->buffer);  // where the part's records begin (redo.h)
    if (b.inserts()) {
      if (b.history && !kept_ids_fit(b, ids)) continue;
      b.admitted.resize(b.rows->size());
      std::iota(b.admitted.begin(), b.admitted.end(), size_t{0});
      const bool admitted = w->policies.until_refused([&](auto& p) { return p.admit(b, ctx); },
                                                      [&](auto& p) { p.reject(b); });
      if (!admitted) continue;  // b.status says why; nothing of it is written
      if (prepare) b.txn = w->next_txn++;
      adds_rows = adds_rows || !b.admitted.empty();
      for (size_t i : b.admitted) {
        if (prepare) {  // ids at its commit, so that rows become visible in id order
          b.offsets.push_back(chunk.add_txn_row(b.txn, b.inserted_at(i, ctx.now_ms), (*b.rows)[i]));
          continue;
        }
        RowId id = b.history ? b.history[i].id : 0;  // a copy keeps its ids
        if (id != 0)
          ids.next = id + 1;
        else
          id = ids.give(b.asked ? b.asked[i] : 0);
        b.ids.push_back(id);
        b.offsets.push_back(chunk.add_row(id, b.inserted_at(i, ctx.now_ms), (*b.rows)[i]));
      }
      if (b.history) add_kept_histories(chunk, b);
      if (prepare && b.asked) add_asked_ids(chunk, b);
    } else if (prepare) {
      b.txn = w->next_txn++;
    }
    // Another connection gave the owner's rows back (release_owned holds the writer turn, so
    // it went before this batch): they are back in the queue, not to be removed.
    if (b.owner_end && b.remover->revoked_by()) {
      b.status = revoked_status(*b.remover, b.removals[0], b.removal_count);
      continue;
    }
    w->policies.each([&](auto& p) { p.persist(b, chunk); });
    if (prepare) {
      if (b.removal_count) chunk.add_txn_remove(b.txn, b.removals, b.removal_count);
      if (b.sub_removal_count) chunk.add_txn_sub_remove(b.txn, b.sub, b.sub_removals, b.sub_removal_count);
      chunk.add_txn_prepare(b.txn, b.xid);
      if (b.redo_requested) {
        b.redo = redo.encode(w->file->identity(), b.txn, b.xid);
        if (b.redo.empty() && mode != SyncMode::kNone) sync = true;  // no redo: its own sync then
      }
      continue;
    }
    if (!b.ended.empty()) chunk.add_history(b.ended.data(), b.ended.size());
    if (b.subscribe) {
      b.subscribed_start = b.subscribe->start ? b.subscribe->start : ids.upcoming();
      chunk.add_subscribe(b.subscribe->number, b.subscribed_start, b.subscribe->name, b.subscribe->condition);
    }
    if (b.unsubscribe) chunk.add_unsubscribe(b.unsubscribe);
    if (b.sub_removal_count) chunk.add_sub_remove(b.sub, b.sub_removals, b.sub_removal_count);
    if (b.removal_count) chunk.add_remove(b.removals, b.removal_count);
    if (b.return_count) chunk.add_returns(b.returns, b.return_count);
  }
  chunk.finish();
  if (chunk.empty()) {  // nothing to write (an empty insert, a replayed relay, only duplicates)
    w->policies.each([&](auto& p) { p.written(ctx); });
    // A sync_commits() barrier: what was written unsynced before becomes durable.
    if (sync && w->file->has_unsynced_appends()) {
      BlockingScope syncing(BlockingWait::kSync);
      Status s = w->file->sync(mode);
      if (!s.ok()) {
        w->broken = s;
        for (CommitRequest* r : batch) r->batch.status = s;
      }
    }
    return;
  }

  const uint64_t base = w->file->size();
  Status s = invalidate_snapshot(*w);
  if (s.ok())
    s = w->file->append(w->buffer, mode != SyncMode::kNone,
                        adds_rows ? DataFile::Room::kLeaveReserve : DataFile::Room::kMayUseReserve);
  if (s.ok() && sync) {
    answer_unsynced(leader, batch);
    answer_unsynced_ends(leader, batch, base, ctx.now_ms);  // after it: it leaves null what it answered
    BlockingScope syncing(BlockingWait::kSync);
    s = w->file->sync(mode);
    if (!s.ok()) w->broken = s;  // after a failed sync the page cache may have lost our bytes
  }
  if (!s.ok()) {
    w->unwritten.insert(unwritten_emitted.begin(), unwritten_emitted.end());
    w->policies.each([&](auto& p) { p.failed(ctx); });
    for (CommitRequest* r : batch) {
      if (!r) continue;
      r->batch.status = s;
      r->batch.ids.clear();
    }
    return;
  }
  set_ids(*w, ids);
  w->tail_flagged = flagged;
  w->policies.each([&](auto& p) { p.written(ctx); });
  file_bytes_.store(w->file->size());
  global_stats().group_commits.add();
  // (queue_sync_removals=OFF; a redone prepare's removals are the binary log's to make durable.)
  if (!sync && mode != SyncMode::kNone && std::any_of(batch.begin(), batch.end(), [](const CommitRequest* r) {
        return removes(r) && r->batch.phase == WriteBatch::Phase::kNone;
      }))
    global_stats().unsynced_removal_commits.add();
  publish(batch, *w->file, base, w->buffer, ctx.now_ms);  // only now: hand-off happens after the data is durable
}

void Table::answer_unsynced(const CommitRequest* leader, std::vector<CommitRequest*>& batch) {
  // An unsynced end (a part's commit record) is answered with its chunk: its rows are
  // published with the rest, after the sync.
  // (A prepare is published after the write in any case: its removals are the part's, not applied.)
  auto unsynced = [](const CommitRequest* r) { return !r->batch.sync && r->batch.phase == WriteBatch::Phase::kNone; };
  auto unsynced_removal = [](const CommitRequest* r) {
    return removes(r) && !r->batch.sync && r->batch.status.ok() && r->batch.phase == WriteBatch::Phase::kNone;
  };
  if (std::none_of(batch.begin(), batch.end(), unsynced)) return;
  if (std::any_of(batch.begin(), batch.end(), unsynced_removal)) {
    auto st = state_.lock();
    RowContext ctx = context(*st);
    uint64_t removed = 0;
    for (const CommitRequest* r : batch) {
      if (!unsynced_removal(r)) continue;
      st->ticket = r->ticket;
      removed += publish_removal(*st, r->batch, ctx);
    }
    st->ticket = 0;
    note_index_change(*st, 0, removed);
    finish(*st, ctx);
  }
  for (CommitRequest*& r : batch) {
    if (!unsynced(r)) continue;
    CommitRequest* answered = r;
    r = nullptr;
    if (removes(answered)) global_stats().removals_answered_before_sync.add();
    if (answered == leader) continue;  // the leader returns after the sync, like any leader
    CommitPipeline::answer(answered);
  }
}

uint64_t Table::publish_removal(State& st, const WriteBatch& b, RowContext& ctx) {
  uint64_t removed = 0;
  if (!b.ended.empty()) keep_ended(st, b.ended, b.remover);
  for (size_t i = 0; i < b.removal_count; i++) {
    RowEntry* e = st.index.find(b.removals[i]);
    if (!e || e->holder != b.remover) continue;  // vanished (truncate) meanwhile
    remove(st, *e, ctx);
    removed++;
  }
  release(st, ctx);  // the next row of a group may go now
  return removed;
}

void Table::answer_unsynced_ends(const CommitRequest* leader, std::vector<CommitRequest*>& batch, uint64_t base,
                                 uint64_t now) {
  std::vector<CommitRequest*> ends;
  for (CommitRequest* r : batch) {
    if (!r || !r->batch.status.ok()) continue;  // refused: nothing written
    const WriteBatch& b = r->batch;
    if (b.phase == WriteBatch::Phase::kPrepare) continue;  // gives no ids; published after the sync
    if (!b.sync && b.phase == WriteBatch::Phase::kEnd) {
      ends.push_back(r);
      continue;
    }
    if (!b.sync) continue;  // answer_unsynced() publishes it before the sync too
    break;                  // a synced request: what follows it is published after it
  }
  if (ends.empty()) return;
  {
    auto st = state_.lock();
    publish_locked(*st, ends, base, now);  // an end writes no row of its own (its rows are its TXN_ROWs)
  }
  global_stats().commit_records_before_sync.add(ends.size());
  for (CommitRequest*& r : batch) {
    if (!r || std::find(ends.begin(), ends.end(), r) == ends.end()) continue;
    CommitRequest* answered = r;
    r = nullptr;
    if (answered != leader) CommitPipeline::answer(answered);  // the leader returns after its sync
  }
}

void Table::publish(const std::vector<CommitRequest*>& batch, const DataFile& file, uint64_t base,
                    std::string_view written, uint64_t now) {
  auto st = state_.lock();
  st->tail.append(file.id(), base, written);
  publish_locked(*st, batch, base, now);
}

void Table::publish_locked(State& st, const std::vector<CommitRequest*>& batch, uint64_t base, uint64_t now) {
  uint64_t inserted = 0, removed = 0;
  bool placed_elsewhere = false;
  RowContext ctx = context(st);
  const bool journaling = Snapshots::any();
  for (CommitRequest* r : batch) {
    if (!r || !r->batch.status.ok()) continue;  // answered before the sync / refused: nothing written
    const WriteBatch& b = r->batch;
    st.ticket = r->ticket;
    if (journaling && b.phase == WriteBatch::Phase::kEnd && b.commit && !b.ids.empty())
      st.journal.inserted(r->ticket, b.ids[0]);
    if (journaling && b.phase == WriteBatch::Phase::kNone && !b.ids.empty()) st.journal.inserted(r->ticket, b.ids[0]);
    if (b.phase == WriteBatch::Phase::kPrepare) {
      publish_prepared(st, b, base, now, ctx);
      continue;
    }
    if (b.phase == WriteBatch::Phase::kEnd) {
      if (publish_end(st, b, base + b.txn_end_end, ctx, &inserted, &removed)) placed_elsewhere = true;
      continue;
    }
    if (b.removal_count) removed += publish_removal(st, b, ctx);
    for (size_t k = 0; k < b.ids.size(); k++) {
      RowEntry e;
      e.id = b.ids[k];
      e.offset = base + b.offsets[k];
      const size_t row = b.admitted[k];
      e.time_ms = b.inserted_at(row, now);
      std::string_view payload = (*b.rows)[row];
      e.length = static_cast<uint32_t>(payload.size());
      st.index.append(e);
      inserted++;
      RowEntry& added = *st.index.find(e.id);
      if (place_new(st, added, payload, b.history ? &b.history[row] : nullptr, ctx)) placed_elsewhere = true;
    }
  }
  st.ticket = 0;
  if (journaling || !st.journal.empty()) st.journal.prune(Snapshots::oldest());
  if (placed_elsewhere) release(st, ctx);  // rows behind a copied row that is dead or delayed
  st.policies.each([&](auto& p) { p.published(ctx); });
  note_index_change(st, inserted, removed);
  finish(st, ctx);
}

fmt::Meta Table::meta_now(const Writer& w, uint64_t removed) const {
  return fmt::Meta{w.ids.next, counters_.rows_inserted.get(), counters_.rows_removed.get() + removed, w.ids.floor};
}

void Table::set_ids(Writer& w, const IdSequence& ids) {
  w.ids = ids;
  next_rowid_.store(ids.next);
  id_floor_.store(ids.floor);
}

void Table::note_index_change(const State& st, uint64_t inserted, uint64_t removed) {
  rows_.store(st.index.live());
  live_bytes_.store(st.index.live_bytes());
  counters_.rows_inserted.add(inserted);
  counters_.rows_removed.add(removed);
  global_stats().rows_written.add(inserted);
  global_stats().rows_removed.add(removed);
  // The engine's total: what this table's index holds now, taken every 256 changes (it walks
  // the index's blocks) and whenever the index is small.
  if (st.index.end_pos() < 4 * RowIndex::kBlockRows || ++memory_ticks_ % 256 == 0) {
    const uint64_t now = st.index.memory_bytes() + st.known_sums.memory_bytes();
    global_stats().memory_bytes.add(now - memory_bytes_.exchange(now));
  }
}

Status Table::check_row_lengths(const std::vector<std::string_view>& rows) const {
  for (std::string_view r : rows)
    if (r.size() > fmt::kMaxRowLength)
      return Status(ErrorCode::kInvalid, "file " + path() + ": row of " + std::to_string(r.size()) +
                                             " bytes is too large");
  return Status::Ok();
}

Status Table::insert(const std::vector<std::string_view>& rows, std::vector<RowId>* ids, size_t* deduplicated,
                     const RowId* asked) {
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  if (ids) ids->clear();
  if (deduplicated) *deduplicated = 0;
  if (rows.empty()) return Status::Ok();
  CommitRequest req;
  req.batch.rows = &rows;
  req.batch.asked = asked;
  Status s = commit(&req);
  if (s.ok() && ids) *ids = std::move(req.batch.ids);
  if (s.ok() && deduplicated) *deduplicated = req.batch.deduplicated;
  return s;
}

Status Table::insert_with_history(const std::vector<std::string_view>& rows, const std::vector<RowHistory>& history,
                                  const RowId* asked) {
  if (history.size() != rows.size())
    return Status(ErrorCode::kInvalid, "insert_with_history: " + std::to_string(rows.size()) + " rows but " +
                                           std::to_string(history.size()) + " histories");
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  if (rows.empty()) return Status::Ok();
  CommitRequest req;
  req.batch.rows = &rows;
  req.batch.history = history.data();
  req.batch.asked = asked;
  return commit(&req);
}

Status Table::insert_relayed(const std::vector<std::string_view>& rows, uint32_t source_id,
                             const RowId* source_rowids, bool reset, size_t* replayed, std::vector<size_t>* dropped) {
  *replayed = 0;
  if (dropped) dropped->clear();
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  if (Status s = check_relayed_ids(source_rowids, rows.size()); !s.ok()) return s;
  if (rows.empty()) return Status::Ok();
  std::vector<RelayTag> tags(rows.size());
  for (size_t i = 0; i < rows.size(); i++) tags[i] = RelayTag{source_id, source_rowids[i], reset && i == 0};
  CommitRequest req;
  req.batch.rows = &rows;
  req.batch.relay = tags.data();
  Status s = commit(&req);
  if (s.ok()) *replayed = req.batch.replays.size();
  if (s.ok() && dropped) *dropped = req.batch.dropped_rows();
  return s;
}

Status Table::raise_id_floor(RowId floor) {
  if (floor <= id_floor_.load()) return Status::Ok();
  CommitRequest req;
  req.batch.id_floor = floor;
  return commit(&req);
}

RowId Table::last_relayed_rowid(uint32_t source_id) { return writer_.lock()->policies.get<Relay>().last(source_id); }

// No look at the index first: only TRUNCATE/DROP can take an owned row away (a lease
// can't: Consumer::end() settles it first), and then publish() skips the id (and
// recovery ignores a REMOVE of an id it does not know).
Status Table::end_rows(const Holder* h, const RowId* ids, size_t count) {
  for (;;) {
    if (std::shared_ptr<Table> next = successor()) return next->end_rows(h, ids, count);  // its rows moved there
    CommitRequest req;
    req.batch.removals = ids;
    req.batch.removal_count = count;
    req.batch.remover = h;
    req.batch.owner_end = true;
    req.batch.sync = h->sync_removals();
    Status s = commit(&req);
    if (s.code() == ErrorCode::kMoved) continue;  // taken over meanwhile
    if (s.code() == ErrorCode::kDropped) return Status::Ok();
    return s;
  }
}

std::vector<RowId> Table::take_claims(const Holder* claimer) {
  std::vector<RowId> ids;
  auto st = state_.lock();
  auto it = st->claims.find(claimer);
  if (it == st->claims.end()) return ids;
  for (RowId id : it->second) {
    RowEntry* e = st->index.find(id);
    if (e && e->state == RowState::kClaimed && e->holder == claimer) ids.push_back(id);
  }
  st->claims.erase(it);
  return ids;
}

void Table::restore_claims(const Holder* claimer, const std::vector<RowId>& ids) {
  if (ids.empty()) return;
  auto st = state_.lock();
  auto& claims = st->claims[claimer];
  claims.insert(claims.end(), ids.begin(), ids.end());
}

Status Table::commit_part(const Holder* txn, const std::vector<std::string_view>& rows, Admission* admission) {
  admission->dropped.clear();
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  std::vector<RowId> ids = take_claims(txn);
  if (rows.empty() && ids.empty() && admission->relay_records.empty()) return Status::Ok();
  CommitRequest req;
  if (!rows.empty()) req.batch.rows = &rows;
  req.batch.removals = ids.data();
  req.batch.removal_count = ids.size();
  req.batch.remover = txn;
  // Removals alone may skip the sync (queue_sync_removals=OFF); new rows never do.
  req.batch.sync = !rows.empty() || !admission->relay_records.empty() || !txn || txn->sync_removals();
  admission->fill(req.batch);
  Status s = commit(&req);
  if (s.ok()) {
    admission->learn(req.batch);
    return s;
  }
  // Nothing was written: the claims are the transaction's again (its rollback gives them back).
  restore_claims(txn, ids);
  return s.code() == ErrorCode::kDropped ? Status::Ok() : s;
}

Status Table::remove_claimed_rows(const Holder* claimer, size_t* removed) {
  *removed = 0;
  std::vector<RowId> ids = take_claims(claimer);
  if (ids.empty()) return Status::Ok();
  CommitRequest req;
  req.batch.removals = ids.data();
  req.batch.removal_count = ids.size();
  req.batch.remover = claimer;
  req.batch.sync = !claimer || claimer->sync_removals();
  Status s = commit(&req);
  if (s.ok()) {
    *removed = ids.size();
    return s;
  }
  // The DELETE failed: its rows go back to the queue instead of staying stuck.
  auto st = state_.lock();
  RowContext ctx = context(*st);
  for (RowId id : ids) {
    RowEntry* e = st->index.find(id);
    if (e && e->state == RowState::kClaimed && e->holder == claimer) requeue(*st, *e, std::chrono::milliseconds(0), ctx);
  }
  finish(*st, ctx);
  return s;
}

}  // namespace q4m
