// Two-phase commit of a transaction's part in one table (docs/transactions.md): prepare
// writes it durably without applying it; its end applies it (commit) or drops it (rollback).
// Between the two its rows are in no index and the rows it removes stay claimed, by a holder
// of its own, so that the transaction's connection may go (an XA transaction prepared and
// detached) and a restart finds the part again (recovery reads TXN_* records).
#include "core/table/redo.h"
#include "core/table/table.h"
#include "core/util/clock.h"

namespace q4m {

namespace {
// Past this many rows a part's prepare is written as any other (its redo stays small).
constexpr size_t kMaxUnwrittenRemovals = 1024;
}  // namespace

Status Table::prepare_part(const Holder* txn, const std::vector<std::string_view>& rows, std::string_view xid,
                           uint64_t* id, Admission* admission) {
  *id = 0;
  if (Status s = check_row_lengths(rows); !s.ok()) return s;
  if (admission && admission->redo && rows.empty() && admission->relay_records.empty() &&
      prepare_unwritten(txn, xid, id, &admission->redo_record))
    return Status::Ok();
  std::vector<RowId> ids = take_claims(txn);
  CommitRequest req;
  req.batch.phase = WriteBatch::Phase::kPrepare;
  req.batch.xid = xid;
  if (!rows.empty()) req.batch.rows = &rows;
  req.batch.removals = ids.data();
  req.batch.removal_count = ids.size();
  req.batch.remover = txn;
  if (admission) admission->fill(req.batch);
  Status s = commit(&req);
  if (s.ok()) {
    *id = req.batch.txn;
    if (admission) admission->learn(req.batch);
    return s;
  }
  restore_claims(txn, ids);  // nothing was written: the claims are the transaction's again
  return s;
}

// A part that only removes rows, which the binary log redoes (redo.h), costs no turn of the
// group commit at its prepare: its rows go to the part as a written prepare's would, its redo
// is encoded here, and its records (TXN_REMOVE, TXN_PREPARE) reach the file in its end's chunk
// before its TXN_END (write_batch), or in the new file of a compaction that runs first (which
// rewrites every prepared part). Until then the binary log alone holds it: recovery finds the
// part lacking in the file its redo names and appends it (redo_parts), or, after a compaction,
// finds it in the new file.
bool Table::prepare_unwritten(const Holder* txn, std::string_view xid, uint64_t* id, std::string* redo) {
  std::vector<RowId> ids = take_claims(txn);
  if (ids.empty() || ids.size() > kMaxUnwrittenRemovals) {
    restore_claims(txn, ids);
    return false;
  }
  DataFile::Identity file;
  {
    auto w = writer_.lock();
    if (successor_raw_.load() || dropped_.load() || !w->broken.ok()) {  // the written prepare says why
      restore_claims(txn, ids);
      return false;
    }
    *id = w->next_txn++;
    file = w->file->identity();
    w->unwritten.insert(*id);
    auto st = state_.lock();  // (the writer's order: writer, then state)
    RowContext ctx = context(*st);
    WriteBatch b;
    b.phase = WriteBatch::Phase::kPrepare;
    b.txn = *id;
    b.xid = xid;
    b.removals = ids.data();
    b.removal_count = ids.size();
    b.remover = txn;
    publish_prepared(*st, b, 0, now_ms(), ctx);
    st->prepared[*id].unwritten = true;
    finish(*st, ctx);
  }
  std::string records;
  fmt::ChunkBuilder chunk(&records);
  RedoCapture capture(chunk, records);  // as the writer captures a written part's records
  chunk.add_txn_remove(*id, ids.data(), ids.size());
  chunk.add_txn_prepare(*id, xid);
  *redo = capture.encode(file, *id, xid);  // one chunk: kMaxUnwrittenRemovals keeps it small
  return true;
}

void Table::publish_prepared(State& st, const WriteBatch& b, uint64_t base, uint64_t now, RowContext& ctx) {
  State::Prepared& p = st.prepared[b.txn];
  p.xid.assign(b.xid);
  p.holder = std::make_unique<Holder>();
  p.relay = b.relay_marks;
  p.asked = b.asked_kept;  // its TXN_ASK
  for (size_t k = 0; k < b.offsets.size(); k++) {
    RowEntry e;
    e.offset = base + b.offsets[k];
    e.length = static_cast<uint32_t>((*b.rows)[b.admitted[k]].size());
    e.time_ms = b.inserted_at(b.admitted[k], now);
    p.rows.push_back(e);
  }
  pending_rows_.fetch_add(p.rows.size());
  for (size_t i = 0; i < b.removal_count; i++) {
    RowEntry* e = st.index.find(b.removals[i]);
    if (!e || e->state != RowState::kClaimed || e->holder != b.remover) continue;  // gone (TRUNCATE)
    p.removals.push_back(e->id);
    move(st, *e, Move{RowState::kClaimed, p.holder.get()}, ctx);  // the part's now
  }
}

bool Table::publish_end(State& st, const WriteBatch& b, uint64_t txn_end_end, RowContext& ctx, uint64_t* inserted,
                        uint64_t* removed) {
  auto it = st.prepared.find(b.txn);
  if (it == st.prepared.end()) return false;
  State::Prepared p = std::move(it->second);
  st.prepared.erase(it);
  pending_rows_.fetch_sub(p.rows.size());
  bool placed_elsewhere = false;
  if (b.commit) {
    if (!b.ended.empty()) keep_ended(st, b.ended, p.holder.get());
    for (const RowId id : p.removals) {
      RowEntry* e = st.index.find(id);
      if (!e || e->state != RowState::kClaimed || e->holder != p.holder.get()) continue;
      remove(st, *e, ctx);
      ++*removed;
    }
    for (const RowId id : p.pending) {  // given by a commit since the restart, and queued since
      RowEntry* e = st.index.find(id);
      if (!e || !queued(e->state)) continue;
      move(st, *e, Move{RowState::kClaimed, p.holder.get()}, ctx);
      remove(st, *e, ctx);
      ++*removed;
    }
    release(st, ctx);
    for (size_t k = 0; k < p.rows.size(); k++) {
      RowEntry e = p.rows[k];
      e.id = b.ids[k];  // the writer's (IdSequence)
      e.txn_row = true;  // read back and checked with its TXN_ROW's own checksum (id 0)
      st.index.append(e, txn_end_end);  // its TXN_END: a fold reads to it alone
      ++*inserted;
      RowEntry& added = *st.index.find(e.id);
      const std::string_view payload = (*b.rows)[k];
      if (place_new(st, added, payload, nullptr, ctx)) placed_elsewhere = true;
    }
    if (!b.ids.empty() && b.ids.back() + 1 > next_rowid_.load()) next_rowid_.store(b.ids.back() + 1);
  } else {
    for (const RowId id : p.removals) {
      RowEntry* e = st.index.find(id);
      if (e && e->state == RowState::kClaimed && e->holder == p.holder.get()) requeue(st, *e, std::chrono::milliseconds(0), ctx);
    }
  }
  return placed_elsewhere;
}

namespace {

// The end of a prepared part as a commit request, with the bytes its request points into.
struct PartEnd final : QueueTable::QueuedEnd {
  CommitRequest req;
  std::string xid;                 // of a part prepared without a write, with:
  std::vector<RowId> removals;     // its removals (WriteBatch::part_removals)
  std::vector<std::string> payloads;
  std::vector<std::string_view> views;
  std::vector<fmt::ReturnedRow> returns;
  std::vector<RowId> asked;
};

}  // namespace

// Fills `e` with the end (commit or rollback) of part `id`.
Status Table::build_end(uint64_t id, bool committed, QueuedEnd* end) {
  PartEnd& e = static_cast<PartEnd&>(*end);
  // What the part holds, and (to place its rows, or to take back their dedup keys) its rows'
  // bytes, read outside the state lock.
  std::vector<RowEntry> rows;
  {
    auto st = state_.lock();
    auto it = st->prepared.find(id);
    if (it == st->prepared.end()) return Status(ErrorCode::kNotFound, "file " + path() + ": no prepared part " + std::to_string(id));
    rows = it->second.rows;
    e.asked = it->second.asked;
    if (it->second.unwritten) {  // its records go before its TXN_END, unless the file has them by then
      e.xid = it->second.xid;
      e.removals = it->second.removals;
      e.req.batch.xid = e.xid;
      e.req.batch.part_removals = &e.removals;
    }
    if (!committed) {  // the removed rows come back: their delivery counts as after queue_abort()
      for (RowId r : it->second.removals)
        if (const RowEntry* re = st->index.find(r); re && re->deliveries > 0) e.returns.push_back(fmt::ReturnedRow{r, re->deliveries, 0});
    }
  }
  e.payloads.resize(rows.size());
  for (size_t k = 0; k < rows.size(); k++) {
    Status s = read_prepared_row(rows[k], &e.payloads[k]);
    // Damaged bytes are committed as nothing: the part stays prepared (XA ROLLBACK ends it).
    // A rollback needs a row's bytes only to take its dedup key back: a damaged one keeps it.
    if (s.code() == ErrorCode::kDamaged && !committed) continue;
    if (!s.ok()) return s;
    e.views.push_back(e.payloads[k]);
  }
  e.req.batch.phase = WriteBatch::Phase::kEnd;
  e.req.batch.txn = id;
  e.req.batch.commit = committed;
  e.req.batch.end_rows = rows.size();
  if (!e.asked.empty()) e.req.batch.asked = e.asked.data();
  e.req.batch.rows = &e.views;
  e.req.batch.returns = e.returns.data();
  e.req.batch.return_count = e.returns.size();
  return Status::Ok();
}

Status Table::end_part(uint64_t id, bool committed) {
  PartEnd e;
  Status s = build_end(id, committed, &e);
  if (s.ok()) s = commit(&e.req);
  if (s.ok()) subscriptions_.part_ended(id, committed);  // a subscription's ends in it
  return s;
}

Status Table::queue_end_part(uint64_t id, std::unique_ptr<QueuedEnd>* out, bool durable) {
  auto e = std::make_unique<PartEnd>();
  Status s = build_end(id, true, e.get());
  if (!s.ok()) return s;
  e->req.batch.sync = durable;
  pipeline_.enqueue(&e->req);
  *out = std::move(e);
  return Status::Ok();
}

Status Table::finish_end_part(QueuedEnd& end) {
  CommitRequest& req = static_cast<PartEnd&>(end).req;
  Status s = finish(&req);
  if (s.ok()) subscriptions_.part_ended(req.batch.txn, req.batch.commit);
  return s;
}

Status Table::sync_commits() {
  CommitRequest barrier;  // writes nothing; behind every commit queued before it, then a sync
  return commit(&barrier);
}

Status Table::read_prepared_row(const RowEntry& e, std::string* out) {
  const RowLocation row{0, e.offset, e.length};  // a TXN_ROW's checksum covers id 0
  UncachedRead r;
  {
    auto st = state_.lock();
    Status s;
    if (st->read_cached(row, out, &s)) return s;
    r = st->uncached_read(row);
  }
  return read_uncached(r, out, nullptr);  // (damage is counted; row 0 is set aside nowhere)
}

void Table::restore_prepared(State& st, RecoveredTable& rec, RowContext& ctx) {
  for (auto& [id, part] : rec.prepared) {
    State::Prepared& p = st.prepared[id];
    p.xid = std::move(part.xid);
    p.rows = std::move(part.rows);
    p.relay = std::move(part.relay);
    p.asked = std::move(part.asked);
    p.holder = std::make_unique<Holder>();
    pending_rows_.fetch_add(p.rows.size());
    for (RowId r : part.removals) {  // held until the part ends, as before the restart
      RowEntry* e = st.index.find(r);
      // A row no commit gave yet: a part redone from the binary log (redo.h) may remove a row
      // of a part whose commit record the power cut lost too; that commit comes first (binary
      // log order) and gives it.
      if (!e && r >= rec.next_rowid) p.pending.push_back(r);
      if (!e || !queued(e->state)) continue;
      p.removals.push_back(r);
      move(st, *e, Move{RowState::kClaimed, p.holder.get()}, ctx);
    }
  }
}

Status Table::refuse_with_prepared(const State& st, const char* what) const {
  if (st.prepared.empty()) return Status::Ok();
  return Status(ErrorCode::kInvalid, "file " + path() + ": " + what + " would lose " + std::to_string(st.prepared.size()) +
                                         " prepared transaction part(s) (XA RECOVER lists them): end them with XA "
                                         "COMMIT or XA ROLLBACK first");
}

std::vector<QueueTable::PreparedPartInfo> Table::prepared_parts() {
  std::vector<PreparedPartInfo> out;
  auto st = state_.lock();
  for (const auto& [id, p] : st->prepared) out.push_back(PreparedPartInfo{id, p.xid});
  return out;
}

}  // namespace q4m
