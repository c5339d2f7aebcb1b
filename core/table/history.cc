// History (HISTORY_RETENTION; docs/sql-api.md "History"): rows that ended stay readable for
// the retention period. How a row ends is known when it is claimed (a DELETE, the expiry, a
// purge: Move::ends_as) or is its owner's end (consumed); the writer writes it as a HISTORY
// record in the chunk of the REMOVE or TXN_END that ends the row, so the history is exactly
// as durable as the end; publishing the removal moves the row's place in the file into
// State::ended. With the option off none of this runs (one test of State::history_ms in
// move(), one of history_ms_ per batch in the writer).
#include "core/table/table.h"

namespace q4m {

void Table::note_end_kind(State& st, RowId id, RowState from, const Move& m) {
  if (m.to == RowState::kClaimed) {
    if (m.ends_as != EndKind::kNone) st.ended.mark(id, m.ends_as);
  } else if (from == RowState::kClaimed) {
    st.ended.unmark(id);  // the claim went back: no end of that kind
  }
}

void Table::name_end(const State& st, const RowEntry& e, EndKind kind, NamedRow* named) const {
  if (!st.history_ms) return;
  named->end_kind = static_cast<uint8_t>(kind);
  named->deliveries = e.deliveries;
}

void Table::note_history(std::vector<CommitRequest*>& batch, uint64_t now_ms) {
  auto removes = [](const WriteBatch& b) {
    return (b.phase == WriteBatch::Phase::kNone && b.removal_count > 0) ||
           (b.phase == WriteBatch::Phase::kEnd && b.commit);
  };
  if (std::none_of(batch.begin(), batch.end(), [&](const CommitRequest* r) { return removes(r->batch); })) return;
  auto st = state_.lock();
  if (!st->history_ms) return;
  for (CommitRequest* r : batch) {
    WriteBatch& b = r->batch;
    b.ended.clear();
    if (!removes(b)) continue;
    auto entry = [&](RowId id, const Holder* holder) {
      const RowEntry* e = st->index.find(id);
      if (!e || e->holder != holder) return;  // vanished (TRUNCATE): its REMOVE is ignored too
      b.ended.push_back(fmt::HistoryEntry{id, now_ms, static_cast<uint8_t>(st->ended.kind_of(id)),
                                          st->ended.deliveries_of(id, e->deliveries)});
    };
    if (b.phase == WriteBatch::Phase::kEnd) {
      auto it = st->prepared.find(b.txn);
      if (it == st->prepared.end()) continue;
      for (RowId id : it->second.removals) entry(id, it->second.holder.get());
    } else {
      for (size_t i = 0; i < b.removal_count; i++) entry(b.removals[i], b.remover);
    }
  }
}

void Table::keep_ended(State& st, const std::vector<fmt::HistoryEntry>& ended, const Holder* remover) {
  for (const fmt::HistoryEntry& h : ended) {
    const RowEntry* e = st.index.find(h.id);
    if (!e || e->holder != remover) continue;
    const RowLocation at = st.locate(*e);
    EndedRow r;
    r.id = h.id;
    r.offset = at.offset;
    r.length = at.length;
    r.stored = at.stored;
    r.known = at.known;
    r.id_less = at.id_less;
    r.time_ms = e->time_ms;
    r.end_ms = h.end_ms;
    r.kind = static_cast<EndKind>(h.kind);
    r.deliveries = h.deliveries;
    st.ended.add(r);
  }
  if (!ended.empty()) expire_history(st, ended.front().end_ms);
}

void Table::expire_history(State& st, uint64_t now_ms) {
  if (st.history_ms == 0)
    st.ended.clear();
  else if (now_ms > st.history_ms)
    st.ended.expire(now_ms - st.history_ms);
  note_history_size(st);
}

void Table::restore_history(State& st, RecoveredTable& rec) {
  for (const EndedRow& r : rec.ended) st.ended.add(r);  // configure() drops those past the retention
  rec.ended.clear();
  note_history_size(st);
}

void Table::note_history_size(const State& st) {
  history_rows_.store(st.ended.size(), std::memory_order_relaxed);
  history_bytes_.store(st.ended.bytes(), std::memory_order_relaxed);
}

Status Table::history_rows(std::vector<EndedRow>* rows, std::shared_ptr<DataFile>* file) {
  auto st = state_.lock();
  if (st->dropped) return dropped_status();
  const uint64_t now = now_ms();
  expire_history(*st, now);
  *rows = st->ended.by_id(0);
  *file = st->file;
  return Status::Ok();
}

Status Table::read_history_row(const std::shared_ptr<DataFile>& file, const EndedRow& r, std::string* payload) {
  RowLocation at{r.id, r.offset, r.length, r.stored, r.known, r.id_less};
  return read_snapshot_row(SnapshotRow{at, file}, payload);
}

}  // namespace q4m
