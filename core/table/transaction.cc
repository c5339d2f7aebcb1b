#include "core/table/transaction.h"

#include <algorithm>

#include "core/util/stats.h"

namespace q4m {

Transaction::Transaction(uint64_t connection_id) : holder_(connection_id) {}

Transaction::~Transaction() { rollback(); }

Transaction::Part& Transaction::part_of(const std::shared_ptr<QueueTable>& table) {
  for (Part& p : parts_)
    if (p.table == table) return p;
  Part p;
  p.table = table;
  parts_.push_back(std::move(p));
  return parts_.back();
}

const Transaction::Part* Transaction::find(const QueueTable* table) const {
  for (const Part& p : parts_)
    if (p.table.get() == table) return &p;
  return nullptr;
}

void Transaction::insert(const std::shared_ptr<QueueTable>& table, std::string row, RowId asked) {
  stage(part_of(table), std::move(row), RelayTag{}, nullptr, asked);
}

void Transaction::insert_relayed(const std::shared_ptr<QueueTable>& table, std::string row, const RelayTag& tag) {
  stage(part_of(table), std::move(row), tag, nullptr);
}

void Transaction::stage(Part& p, std::string row, const RelayTag& tag, const RowHistory* history, RowId asked) {
  p.rows.push_back(std::move(row));
  p.unstaged.push_back(false);
  p.tags.push_back(tag);
  if (tag.id) p.relays = true;
  p.asked.push_back(asked);
  if (asked) p.asks = true;
  RowHistory h;
  h.copy = false;  // a new row
  if (history) {
    h = *history;
    p.copies = true;
  }
  p.histories.push_back(h);
  log_.push_back(Change{static_cast<size_t>(&p - parts_.data()), true, false, p.rows.size() - 1});
}

Status Transaction::redrive_dead(const std::shared_ptr<QueueTable>& table, size_t max, size_t* count) {
  std::vector<NamedRow> rows;
  *count = 0;
  Status s = table->claim_dead_rows(max, &holder_, &rows, /*copyable=*/true);
  // The copies follow in id order (their rows' insert order), as the log names them.
  std::sort(rows.begin(), rows.end(), [](const NamedRow& a, const NamedRow& b) { return a.id < b.id; });
  if (s.ok()) s = redrive(table, rows);
  if (s.ok()) *count = rows.size();
  return s;
}

Status Transaction::redrive_named(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows) {
  Status s = table->claim_named(rows.data(), rows.size(), &holder_);
  return s.ok() ? redrive(table, rows) : s;
}

Status Transaction::redrive(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows) {
  if (rows.empty()) return Status::Ok();
  std::vector<QueueTable::RowCopy> copies;
  Status s = table->copy_claimed(&holder_, rows, &copies);
  if (s.ok() && replication_log_) s = replication_log_->redriven(*table, rows);
  if (!s.ok()) {
    std::vector<RowId> ids;
    for (const NamedRow& r : rows) ids.push_back(r.id);
    table->release_claims(&holder_, ids.data(), ids.size());  // dead again
    return s;
  }
  log_claims(table, rows, false);
  Part& p = part_of(table);
  for (size_t i = log_.size() - rows.size(); i < log_.size(); i++) log_[i].redriven = true;
  p.redriven += rows.size();
  for (QueueTable::RowCopy& c : copies) {
    RowHistory h;
    h.insert_time_ms = c.insert_time_ms;  // its age kept, its deliveries over
    stage(p, std::move(c.payload), RelayTag{}, &h);
  }
  return Status::Ok();
}

void Transaction::record_relay(const std::shared_ptr<QueueTable>& table, uint32_t source, RowId last) {
  Part& p = part_of(table);
  p.records.push_back(fmt::SourceMark{source, last, true});  // as that server's record says
  log_.push_back(Change{static_cast<size_t>(&p - parts_.data()), false, false, 0, true});
}

void Transaction::log_claims(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows,
                             bool consumed) {
  Part& p = part_of(table);
  const size_t at = static_cast<size_t>(&p - parts_.data());
  for (const NamedRow& r : rows) log_.push_back(Change{at, false, consumed, r.id});
  p.claimed += rows.size();
  if (consumed) p.consumed += rows.size();
}

Status Transaction::remove_owned(const std::shared_ptr<QueueTable>& table, const Holder& owner, const RowId* ids,
                                 size_t count, bool frees_slot) {
  std::vector<NamedRow> claimed;
  // The rows are claimed, logged and committed where they are owned now: in the table a
  // copying ALTER TABLE built, if one took this one over.
  std::shared_ptr<QueueTable> at = table;
  Status s;
  for (;;) {
    s = at->claim_owned(&owner, ids, count, &holder_, replication_log_ ? &claimed : nullptr, frees_slot);
    if (s.code() != ErrorCode::kMoved) break;
    std::shared_ptr<QueueTable> next = at->moved_to_table();
    if (!next) break;
    at = std::move(next);
  }
  if (!s.ok()) return s;
  // A subscription's rows are not the table's to remove: it logs its ends itself.
  const bool own_rows = at->ends_in_transactions();
  if (!replication_log_ || !own_rows) {
    claimed.clear();
    for (size_t i = 0; i < count; i++) claimed.push_back(NamedRow{ids[i], 0, 0});
  }
  return log_removal(at, claimed, true, nullptr, own_rows);
}

Status Transaction::remove_dead(const std::shared_ptr<QueueTable>& table, size_t max, size_t* count) {
  std::vector<NamedRow> rows;
  *count = 0;
  Status s = table->claim_dead_rows(max, &holder_, &rows);
  if (!s.ok()) return s;
  return log_removal(table, rows, false, count);
}

Status Transaction::remove_expired(const std::shared_ptr<QueueTable>& table, size_t max, size_t* count) {
  std::vector<NamedRow> rows;
  *count = 0;
  Status s = table->claim_expired_rows(&holder_, max, &rows);
  if (!s.ok() || rows.empty()) return s;
  s = log_removal(table, rows, false, count);
  if (!s.ok()) return s;
  for (size_t i = log_.size() - rows.size(); i < log_.size(); i++) log_[i].expired = true;
  part_of(table).expired += rows.size();
  return s;
}

Status Transaction::log_removal(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows,
                                bool consumed, size_t* count, bool tell_log) {
  log_claims(table, rows, consumed);
  if (replication_log_ && tell_log && !rows.empty()) {
    Status s = replication_log_->removed(*table, rows);
    if (!s.ok()) {
      rollback_to(log_.size() - rows.size());
      return s;
    }
  }
  if (count) *count = rows.size();
  return Status::Ok();
}

Status Transaction::remove_named(const std::shared_ptr<QueueTable>& table, const std::vector<NamedRow>& rows) {
  Status s = table->claim_named(rows.data(), rows.size(), &holder_);
  if (!s.ok()) return s;
  return log_removal(table, rows, false, nullptr);
}

bool Transaction::remove_visible(const std::shared_ptr<QueueTable>& table, Consumer* viewer, RowId id) {
  NamedRow named{id, 0, 0};
  if (!table->claim_for_delete(viewer, id, &holder_, replication_log_ ? &named : nullptr)) return false;
  return log_removal(table, {named}, false, nullptr).ok();
}

size_t Transaction::staged(const QueueTable* table) const {
  const Part* p = find(table);
  return p ? p->rows.size() : 0;
}

const std::string* Transaction::staged_row(const QueueTable* table, size_t i) const {
  const Part* p = find(table);
  return p && i < p->rows.size() && !p->unstaged[i] ? &p->rows[i] : nullptr;
}

void Transaction::unstage(const QueueTable* table, size_t i) {
  for (Part& p : parts_)
    if (p.table.get() == table && i < p.unstaged.size()) p.unstaged[i] = true;
}

Status Transaction::drop_staged(const std::shared_ptr<QueueTable>& table, const std::vector<size_t>& positions) {
  Part& p = part_of(table);
  std::vector<size_t> at;  // indices into p.rows
  size_t k = 0, staged = 0;
  for (size_t i = 0; i < p.rows.size() && k < positions.size(); i++) {
    if (p.unstaged[i]) continue;
    if (positions[k] == staged) {
      at.push_back(i);
      k++;
    }
    staged++;
  }
  if (k < positions.size())
    return Status(ErrorCode::kInvalid, "the transaction has no new row at position " + std::to_string(positions[k]) +
                                           " (it inserted " + std::to_string(staged) + " rows into " + table->path() +
                                           ")");
  if (replication_log_) {
    Status s = replication_log_->deduplicated(*table, positions);
    if (!s.ok()) return s;
  }
  for (size_t i : at) p.unstaged[i] = true;
  table->counters().rows_deduplicated.add(at.size());
  return Status::Ok();
}

void Transaction::rollback_to(size_t mark) {
  // Claims taken since the mark go back, per table, in one call each.
  std::vector<std::vector<RowId>> given_back(parts_.size());
  while (log_.size() > mark) {
    const Change c = log_.back();
    log_.pop_back();
    Part& p = parts_[c.part];
    if (c.record) {
      p.records.pop_back();
    } else if (c.insert) {
      p.unstaged[c.id] = true;
    } else {
      given_back[c.part].push_back(c.id);
      p.claimed--;
      if (c.consumed) p.consumed--;
      if (c.redriven) p.redriven--;
      if (c.expired) p.expired--;
    }
  }
  for (size_t i = 0; i < parts_.size(); i++)
    if (!given_back[i].empty()) parts_[i].table->release_claims(&holder_, given_back[i].data(), given_back[i].size());
}

namespace {

// The entries of `all` (one per row a part staged) for the rows still staged.
template <typename T, typename U>
std::vector<T> still_staged(const std::vector<bool>& unstaged, const std::vector<U>& all) {
  std::vector<T> out;
  for (size_t i = 0; i < all.size(); i++)
    if (!unstaged[i]) out.emplace_back(all[i]);
  return out;
}

}  // namespace

std::vector<std::string_view> Transaction::rows_of(const Part& p) const {
  return still_staged<std::string_view>(p.unstaged, p.rows);
}

std::vector<RelayTag> Transaction::tags_of(const Part& p) const {
  return p.relays ? still_staged<RelayTag>(p.unstaged, p.tags) : std::vector<RelayTag>();
}

std::vector<RowHistory> Transaction::histories_of(const Part& p) const {
  return p.copies ? still_staged<RowHistory>(p.unstaged, p.histories) : std::vector<RowHistory>();
}

std::vector<RowId> Transaction::asked_of(const Part& p) const {
  return p.asks ? still_staged<RowId>(p.unstaged, p.asked) : std::vector<RowId>();
}

QueueTable::Admission Transaction::admission_of(const Part& p, Staged* staged) const {
  QueueTable::Admission a;
  a.decided = decided_;
  a.insert_time_ms = insert_time_ms_;
  staged->tags = tags_of(p);
  a.relay = staged->tags.empty() ? nullptr : staged->tags.data();
  staged->histories = histories_of(p);
  a.history = staged->histories.empty() ? nullptr : staged->histories.data();
  staged->asked = asked_of(p);
  a.asked = staged->asked.empty() ? nullptr : staged->asked.data();
  a.relay_records = p.records;
  return a;
}

std::vector<fmt::SourceMark> Transaction::last_relayed(const Part& p, const std::vector<RelayTag>& tags) const {
  std::vector<fmt::SourceMark> marks;
  for (const RelayTag& t : tags) {
    if (!t.id) continue;
    auto seen = [&](const fmt::SourceMark& m) { return m.source == t.source; };
    if (std::find_if(marks.begin(), marks.end(), seen) == marks.end())
      marks.push_back(fmt::SourceMark{t.source, p.table->last_relayed_rowid(t.source)});
  }
  return marks;
}

void Transaction::note_replays(const Part& p, const std::vector<RelayTag>& tags, const QueueTable::Admission& a,
                               const std::vector<fmt::SourceMark>* before) {
  if (a.replayed.empty()) return;
  auto last_of = [&](uint32_t source) {
    if (before)
      for (const fmt::SourceMark& m : *before)
        if (m.source == source) return m.last;
    return p.table->last_relayed_rowid(source);
  };
  std::vector<Replays> found;
  for (size_t i : a.replayed) {
    const RelayTag& t = tags[i];
    auto it = std::find_if(found.begin(), found.end(), [&](const Replays& r) { return r.source == t.source; });
    if (it == found.end()) {
      found.push_back(Replays{p.table.get(), t.source, 0, 0, t.id, t.id, last_of(t.source)});
      it = found.end() - 1;
    }
    it->dropped++;
    it->last = t.id;
  }
  for (Replays& r : found) {
    for (const RelayTag& t : tags) r.relayed += t.id && t.source == r.source;
    replays_.push_back(r);
  }
}

void Transaction::note_duplicates(const Part& p, const QueueTable::Admission& a) {
  const size_t dropped = a.dropped.size() - std::min(a.dropped.size(), a.replayed.size());  // the rest are replays
  if (dropped > 0) duplicates_.push_back(Duplicates{p.table.get(), dropped});
}

Status Transaction::prepare(std::string_view xid, const QueueTable** failed_table) {
  replays_.clear();
  duplicates_.clear();
  for (Part& p : parts_) {
    const std::vector<std::string_view> rows = rows_of(p);
    if (rows.empty() && p.claimed == 0 && p.records.empty()) continue;
    Staged staged;
    QueueTable::Admission admission = admission_of(p, &staged);
    admission.redo = replication_log_ && replication_log_->redoes(*p.table);
    Status s = p.table->prepare_part(&holder_, rows, xid, &p.prepared, &admission);
    if (s.ok() && !admission.redo_record.empty()) s = replication_log_->prepared(*p.table, admission.redo_record);
    if (s.ok()) note_replays(p, staged.tags, admission);
    if (s.ok()) note_duplicates(p, admission);
    if (s.ok() && replication_log_ && !admission.dropped.empty())
      s = replication_log_->deduplicated(*p.table, admission.dropped);
    for (size_t k = 0; s.ok() && replication_log_ && k < admission.relayed.size(); k++)
      s = replication_log_->relayed(*p.table, admission.relayed[k].source, admission.relayed[k].last);
    if (s.ok()) continue;
    if (failed_table) *failed_table = p.table.get();
    rollback();  // the parts prepared before, and the claims of the rest
    return s;
  }
  prepared_ = true;
  return Status::Ok();
}

void Transaction::queue_commit(bool durable) {
  for (Part& p : parts_)
    if (p.prepared && !p.queued) (void)p.table->queue_end_part(p.prepared, &p.queued, durable);
}

// A queued end is the coordinator's decision: it is finished (written) whatever comes next.
Status Transaction::finish_queued(Part& p) {
  Status s = p.table->finish_end_part(*p.queued);
  p.queued.reset();
  return s;
}

Status Transaction::commit(const QueueTable** failed_table) {
  Status failed;
  if (!prepared_) replays_.clear(), duplicates_.clear();
  for (Part& p : parts_) {
    if (p.prepared) {  // its admission ran at prepare: its end is not refused
      Status s = p.queued ? finish_queued(p) : p.table->end_part(p.prepared, true);
      if (s.ok()) count_ended(p);
      if (!s.ok() && failed.ok() && s.code() != ErrorCode::kDropped) {
        failed = s;
        if (failed_table) *failed_table = p.table.get();
      }
      continue;
    }
    if (!failed.ok()) {  // the rest is rolled back
      if (p.claimed) p.table->release_claims(&holder_);
      continue;
    }
    const std::vector<std::string_view> rows = rows_of(p);
    if (rows.empty() && p.claimed == 0 && p.records.empty()) continue;
    Staged staged;
    QueueTable::Admission admission = admission_of(p, &staged);  // one phase: no binary log coordinates it, none is told
    const std::vector<fmt::SourceMark> before = p.relays ? last_relayed(p, staged.tags) : std::vector<fmt::SourceMark>{};
    Status s = p.table->commit_part(&holder_, rows, &admission);
    if (s.ok()) note_replays(p, staged.tags, admission, &before);
    if (s.ok()) note_duplicates(p, admission);
    if (s.ok()) count_ended(p);
    if (!s.ok()) {
      if (p.claimed) p.table->release_claims(&holder_);
      failed = s;
      if (failed_table) *failed_table = p.table.get();
    }
  }
  clear();
  return failed;
}

void Transaction::count_ended(const Part& p) {
  p.table->counters().rows_consumed.add(p.consumed);
  p.table->counters().rows_redriven.add(p.redriven);
  global_stats().rows_redriven.add(p.redriven);
  p.table->counters().rows_expired.add(p.expired);
  global_stats().rows_expired.add(p.expired);
}

void Transaction::rollback() {
  for (Part& p : parts_) {
    if (p.queued)
      (void)finish_queued(p);  // committed: the coordinator had decided
    else if (p.prepared)
      (void)p.table->end_part(p.prepared, false);  // a failure leaves it prepared: ended by xid later
    else if (p.claimed)
      p.table->release_claims(&holder_);
  }
  clear();
}

void Transaction::detach() {
  for (Part& p : parts_)
    if (p.queued) (void)finish_queued(p);
  clear();
}

void Transaction::clear() {
  parts_.clear();
  log_.clear();
  prepared_ = false;
}

}  // namespace q4m
