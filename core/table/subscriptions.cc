// Subscriptions: see subscriptions.h.
#include "core/table/subscriptions.h"

#include <algorithm>
#include <optional>

#include "core/file/replacement_file.h"
#include "core/table/subscription_gates.h"
#include "core/table/subscription_log.h"
#include "core/table/table.h"
#include "core/table/transaction.h"

namespace q4m {

using SteadyTime = std::chrono::steady_clock::time_point;

struct Subscriptions::SubRow {
  enum State : uint8_t { kFree, kOwned, kDelayed, kDead, kEnding, kDone };
  State state = kFree;
  bool from_dead = false;  // lent out by queue_take_dead: an abort makes it dead again
  uint16_t deliveries = 0;
  const Holder* holder = nullptr;
  SteadyTime due{};       // kDelayed: when it is free again
  SteadyTime taken_at{};  // kOwned
};

struct Subscriptions::Sub {
  uint32_t number = 0;
  std::string name, condition;
  RowId start = 1;
  std::shared_ptr<const RowFilter> filter;  // compiled condition (null: every row)
  bool filter_known = false;                // set_filter() was called (or no condition)
  RowId floor = 1;      // every row below is decided
  RowId free_from = 1;  // no free row below (>= floor)
  std::map<RowId, SubRow> rows;  // rows above floor it touched
  SubscriptionGates gates;       // group order and limits of its takes
  std::map<const Holder*, SteadyTime> leases;
  std::set<const Holder*> lease_expired;  // their rows went back; told at their next end
  std::weak_ptr<SubscriptionTable> table;
  uint64_t delivered = 0, ended = 0;
};

// ---- SubscriptionTable: a subscription as consumers see it -----------------------------

class SubscriptionTable final : public QueueTable {
 public:
  SubscriptionTable(std::shared_ptr<Table> parent, uint32_t number, std::string name)
      : parent_(std::move(parent)), number_(number), name_(std::move(name)) {}
  Subscriptions& subs() const { return parent_->subscriptions_; }
  uint32_t number() const { return number_; }

  Status insert(const std::vector<std::string_view>&, std::vector<RowId>*, size_t*, const RowId*) override {
    return refuse("INSERT");
  }
  Status insert_relayed(const std::vector<std::string_view>&, uint32_t, const RowId*, bool, size_t*,
                        std::vector<size_t>*) override {
    return refuse("INSERT");
  }
  RowId last_relayed_rowid(uint32_t) override { return 0; }
  Status insert_with_history(const std::vector<std::string_view>&, const std::vector<RowHistory>&,
                             const RowId*) override {
    return refuse("INSERT");
  }
  Status take_over(const std::shared_ptr<QueueTable>&, bool) override { return refuse("ALTER TABLE"); }
  // Its rows are the table's: an owner's scan of the table reads them (same_queue()).
  const QueueTable* moved_to() const override { return parent_.get(); }
  std::shared_ptr<QueueTable> moved_to_table() override { return nullptr; }
  Status next_visible(const Consumer* viewer, RowId after, RowId* id, std::string* payload, bool* found) override {
    return parent_->next_visible(viewer, after, id, payload, found);
  }
  Status read_row(RowId id, std::string* payload, bool* found, const Consumer*) override {
    return parent_->read_row(id, payload, found, nullptr);
  }
  Status next_row(RowId after, RowId* id, std::string* payload, bool* found, RowHistory* history) override {
    return parent_->next_row(after, id, payload, found, history);
  }
  uint64_t visible_count(const Consumer* viewer) override { return parent_->visible_count(viewer); }
  Status snapshot_rows(uint64_t, std::vector<SnapshotRow>*) override { return refuse("a snapshot read"); }
  Status snapshot_count(uint64_t, uint64_t*) override { return refuse("a snapshot read"); }
  Status read_snapshot_row(const SnapshotRow&, std::string*) override { return refuse("a snapshot read"); }
  Status history_rows(std::vector<EndedRow>*, std::shared_ptr<DataFile>*) override { return refuse("a history read"); }
  Status read_history_row(const std::shared_ptr<DataFile>&, const EndedRow&, std::string*) override { return refuse("a history read"); }
  void prune_snapshot_journal() override {}
  bool claim_for_delete(Consumer*, RowId, const Holder*, NamedRow*) override { return false; }
  Status remove_claimed(Consumer*) override { return Status::Ok(); }
  Status truncate() override { return refuse("TRUNCATE"); }
  Status compact() override { return parent_->compact(); }
  Status copy_data(const std::string&) override { return refuse("a backup"); }
  void configure(std::shared_ptr<const TableOptions>) override {}
  std::shared_ptr<const TableOptions> options() const override { return parent_->options(); }
  Status release_owned(RowId id, uint64_t by_connection, size_t* released) override {
    return subs().release_owned(number_, id, by_connection, released);
  }
  Status redrive_dead(size_t max, size_t* moved) override { return subs().redrive_dead(number_, max, moved); }
  Status purge_dead(size_t max, size_t* purged) override { return subs().purge_dead(number_, max, purged); }
  RowView row_view(RowId id, const Consumer* viewer) override { return parent_->row_view(id, viewer); }
  TableStats info() override {
    bool found = false;
    const SubscriptionInfo i = subs().info(number_, &found);
    TableStats s;
    counters_.copy_to(&s);
    s.rows = i.pending_rows;
    s.owned_rows = i.owned_rows;
    s.delayed_rows = i.delayed_rows;
    s.dead_rows = i.dead_rows;
    s.waiters = i.waiters;
    s.oldest_age_ms = i.oldest_age_ms;
    s.next_rowid = parent_->ids().upcoming();
    return s;
  }
  IdSequence ids() const override { return parent_->ids(); }
  Status raise_id_floor(RowId) override { return refuse("AUTO_INCREMENT"); }
  RowId snapshot_upcoming_id(uint64_t point) override { return parent_->snapshot_upcoming_id(point); }
  std::vector<OwnedRowInfo> owned_rows() override { return subs().owned_rows(number_); }
  std::vector<HeldGroupInfo> held_groups(size_t) override { return {}; }
  TableCounters& counters() override { return counters_; }
  const std::string& path() const override { return parent_->path(); }
  Take take(const TakeRequest& r, bool register_waiter) override { return subs().take(number_, r, register_waiter, false); }
  Take take_dead(const TakeRequest& r) override { return subs().take(number_, r, false, true); }
  void unregister(const Receiver* r) override { subs().unregister(number_, r); }
  // Every take scans in order (waiters are told to scan again, never handed a row): nothing
  // is provisional here.
  void keep_handed(const Holder*, RowId, std::chrono::milliseconds) override {}
  void give_back(const Holder* h, RowId id, uint32_t) override {
    subs().abort_rows(number_, h, &id, 1, std::chrono::milliseconds(0));
  }
  Status end_rows(const Holder* h, const RowId* ids, size_t count) override {
    return subs().end_rows(number_, h, ids, count);
  }
  size_t abort_rows(const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds delay) override {
    return subs().abort_rows(number_, h, ids, count, delay);
  }
  Status settle_lease(const Holder* h, RowId, size_t) override { return subs().settle_lease(number_, h); }
  Status renew_lease(const Holder* h, const RowId*, size_t, std::chrono::milliseconds lease) override {
    return subs().renew_lease(number_, h, lease);
  }
  // An end inside an explicit transaction joins it (Subscriptions::claim_ends); in autocommit
  // it commits at once, also with the binary log on (no statement transaction).
  void release_claims(const Holder* h, const RowId* ids, size_t count) override {
    subs().release_ends(number_, h, ids, count);
  }
  bool ends_in_transactions() const override { return false; }
  Status claim_owned(const Holder* owner, const RowId* ids, size_t count, const Holder* as, std::vector<NamedRow>*,
                     bool) override {
    return subs().claim_ends(number_, owner, ids, count, as);
  }
  Status claim_named(const NamedRow*, size_t, const Holder*) override { return refuse("a replica's removal"); }
  Status claim_dead_rows(size_t, const Holder*, std::vector<NamedRow>*, bool) override {
    return refuse("queue_purge_dead()");
  }
  Status claim_expired_rows(const Holder*, size_t, std::vector<NamedRow>*) override { return Status::Ok(); }
  Status copy_claimed(const Holder*, const std::vector<NamedRow>&, std::vector<RowCopy>*) override {
    return refuse("queue_redrive_dead()");
  }
  Status commit_part(const Holder* txn, const std::vector<std::string_view>& rows, Admission*) override {
    return rows.empty() ? subs().commit_txn_ends(number_, txn) : refuse("INSERT");
  }
  // Its part is the table's (its prepared parts are the table's: XA RECOVER, recovery).
  Status prepare_part(const Holder* txn, const std::vector<std::string_view>& rows, std::string_view xid, uint64_t* id,
                      Admission*) override {
    *id = 0;
    return rows.empty() ? subs().prepare_ends(number_, txn, xid, id) : refuse("INSERT");
  }
  Status end_part(uint64_t id, bool commit) override { return parent_->end_part(id, commit); }
  Status queue_end_part(uint64_t id, std::unique_ptr<QueuedEnd>* out, bool durable) override {
    return parent_->queue_end_part(id, out, durable);
  }
  Status sync_commits() override { return parent_->sync_commits(); }
  Status finish_end_part(QueuedEnd& end) override { return parent_->finish_end_part(end); }
  std::vector<PreparedPartInfo> prepared_parts() override { return {}; }
  Status dropped_status() const override {
    if (parent_->dropped_.load()) return parent_->dropped_status();
    return Status(ErrorCode::kDropped, "table " + parent_->path() + ": subscription '" + name_ + "' was dropped");
  }

 private:
  Status refuse(const char* what) const {
    return Status(ErrorCode::kInvalid, "subscription '" + name_ + "' of table " + parent_->path() + ": " + what +
                                           " acts on the table, not on a subscription");
  }
  std::shared_ptr<Table> parent_;
  const uint32_t number_;
  const std::string name_;
  TableCounters counters_;
};

// ---- the table's side ---------------------------------------------------------------------

void Table::set_plain_below(RowId below) {
  auto st = state_.lock();
  if (st->plain_below == below) return;
  const bool raised = below > st->plain_below;
  st->plain_below = below;
  st->first_free_hint = 0;  // scans passed rows that may be takeable now
  st->cursors.clear();
  if (raised) {  // rows that were the subscriptions' are plain ones again
    RowContext ctx = context(*st);
    serve_waiters(*st, ctx);
    finish(*st, ctx);
  }
}

void Table::claim_queued(const std::vector<RowId>& ids, const Holder* as) {
  if (ids.empty()) return;
  auto st = state_.lock();
  RowContext ctx = context(*st);
  for (RowId id : ids) {
    RowEntry* e = st->index.find(id);
    if (e && queued(e->state)) move(*st, *e, Move{RowState::kClaimed, as}, ctx);
  }
  finish(*st, ctx);
}

uint64_t Table::live_rows_from(RowId id) {
  auto st = state_.lock();
  uint64_t below = 0;
  const size_t end = st->index.lower_bound(id);
  for (size_t p = st->index.lower_bound(0); p < end; p++)
    if (st->index.at(p).state != RowState::kRemoved) below++;
  return st->index.live() - below;
}

// ---- Subscriptions ----------------------------------------------------------------------

namespace {

uint64_t wall_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

Status check_name(std::string_view name) {
  if (name.empty() || name.size() > 64)
    return Status(ErrorCode::kInvalid, "a subscription name must have 1 to 64 characters");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok)
      return Status(ErrorCode::kInvalid, "subscription name '" + std::string(name) +
                                             "': only letters, digits, '_' and '-' are allowed");
  }
  return Status::Ok();
}

}  // namespace

Subscriptions::Subscriptions(Table& table) : table_(table) {}
Subscriptions::~Subscriptions() = default;

Subscriptions::Sub* Subscriptions::State::by_number(uint32_t sub) {
  auto it = subs.find(sub);
  return it == subs.end() ? nullptr : it->second.get();
}

Subscriptions::Sub* Subscriptions::State::by_name(std::string_view name) {
  for (auto& [n, s] : subs)
    if (s->name == name) return s.get();
  return nullptr;
}

void Subscriptions::restore(std::map<uint32_t, RecoveredSubscription>& subs, uint32_t next_number) {
  {
    auto state = state_.lock();
    state->next_number = std::max(state->next_number, next_number);
    for (auto& [number, r] : subs) {
      auto s = std::make_unique<Sub>();
      s->number = number;
      s->name = r.name;
      s->condition = r.condition;
      s->filter_known = r.condition.empty();
      s->start = s->floor = s->free_from = std::max<RowId>(r.start, 1);
      for (RowId id : r.ended)
        if (id >= s->start && table_.row_view(id, nullptr) != QueueTable::RowView::kGone)
          s->rows[id].state = SubRow::kDone;
      state->subs[number] = std::move(s);
    }
    count_.store(state->subs.size());
    for (auto& [n, s] : state->subs) advance_floor(*s);
  }
  plain_floor_changed();
  // Rows every subscription ended whose REMOVE a crash lost.
  std::vector<RowId> candidates;
  {
    auto state = state_.lock();
    for (auto& [n, s] : state->subs)
      for (auto& [id, row] : s->rows)
        if (row.state == SubRow::kDone) candidates.push_back(id);
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<RowId> gone;
  {
    auto state = state_.lock();
    gone = removable(*state, candidates);
  }
  if (!gone.empty()) (void)remove_parent_rows(gone, true, "");
}

bool Subscriptions::decided(const Sub& s, RowId id) const {
  if (id < s.start || id < s.floor) return true;
  auto it = s.rows.find(id);
  return it != s.rows.end() && (it->second.state == SubRow::kDone || it->second.state == SubRow::kEnding);
}

// Moves the floor over the rows at its bottom that are decided or gone from the table.
void Subscriptions::advance_floor(Sub& s) {
  for (;;) {
    RowId id = 0;
    bool found = false;
    if (!table_.next_row(s.floor - 1, &id, nullptr, &found, nullptr).ok() || !found) {
      // Nothing live at or above the floor: what it touched is gone.
      for (auto it = s.rows.begin(); it != s.rows.end() && it->first < s.floor; it = s.rows.erase(it))
        s.gates.released(it->first);
      return;
    }
    for (auto it = s.rows.begin(); it != s.rows.end() && it->first < id; it = s.rows.erase(it))
      s.gates.released(it->first);  // removed from the table (DELETE, TTL)
    auto it = s.rows.find(id);
    if (id < s.start || (it != s.rows.end() && it->second.state == SubRow::kDone)) {
      if (it != s.rows.end()) s.rows.erase(it);
      s.floor = id + 1;
      s.free_from = std::max(s.free_from, s.floor);
      continue;
    }
    s.floor = std::max(s.floor, id);
    s.free_from = std::max(s.free_from, s.floor);
    return;
  }
}

std::vector<RowId> Subscriptions::removable(State& st, const std::vector<RowId>& ids) {
  std::vector<RowId> out;
  for (RowId id : ids) {
    if (st.removing.count(id)) continue;
    bool all = true;
    for (auto& [n, s] : st.subs)
      if (!decided(*s, id)) {
        all = false;
        break;
      }
    if (!all) continue;
    st.removing.insert(id);
    out.push_back(id);
  }
  return out;
}

Status Subscriptions::commit_ends(uint32_t sub, const std::vector<RowId>& ended, const std::vector<RowId>& removed,
                                  bool sync) {
  CommitRequest req;
  req.batch.sub = sub;
  req.batch.sub_removals = ended.data();
  req.batch.sub_removal_count = ended.size();
  req.batch.removals = removed.data();
  req.batch.removal_count = removed.size();
  req.batch.remover = nullptr;  // queued rows: held by no one in the table
  req.batch.sync = sync;
  return table_.commit(&req);
}

namespace {

// Tells the SubscriptionLog (if any) what a commit did; ids sorted for it.
Status log_ended(const QueueTable& table, std::string_view name, std::vector<RowId> ended, std::vector<RowId> removed) {
  SubscriptionLog* log = SubscriptionLog::get();
  if (!log || (ended.empty() && removed.empty())) return Status::Ok();
  std::sort(ended.begin(), ended.end());
  std::sort(removed.begin(), removed.end());
  return log->ended(table, name, ended, removed);
}

}  // namespace

Status Subscriptions::remove_parent_rows(const std::vector<RowId>& ids, bool sync, const std::string& by) {
  if (ids.empty()) return Status::Ok();
  Status s = commit_ends(0, {}, ids, sync);
  {
    auto state = state_.lock();
    for (RowId id : ids) state->removing.erase(id);
  }
  if (!s.ok()) return s;
  return log_ended(table_, by, {}, ids);
}

void Subscriptions::plain_floor_changed() {
  RowId below = ~RowId(0);
  {
    auto state = state_.lock();
    for (auto& [n, s] : state->subs) below = std::min(below, s->start);
  }
  table_.set_plain_below(below);
}

Status Subscriptions::create(std::string_view name, std::string_view condition, bool from_oldest) {
  return create_at(name, condition, from_oldest ? RowId(1) : RowId(0));
}

Status Subscriptions::apply_subscribe(std::string_view name, std::string_view condition, RowId start) {
  {
    auto state = state_.lock();
    if (Sub* s = state->by_name(name)) {
      if (s->start == std::max<RowId>(start, 1) && s->condition == condition) return Status::Ok();  // applied already
      return Status(ErrorCode::kExists, "table " + table_.path() + ": subscription '" + std::string(name) +
                                            "' exists with another start or condition");
    }
  }
  return create_at(name, condition, std::max<RowId>(start, 1));
}

Status Subscriptions::create_at(std::string_view name, std::string_view condition, RowId start) {
  if (Status s = check_name(name); !s.ok()) return s;
  uint32_t number;
  {
    auto state = state_.lock();
    if (state->by_name(name))
      return Status(ErrorCode::kExists, "table " + table_.path() + ": subscription '" + std::string(name) +
                                            "' exists already");
    number = state->next_number++;
  }
  // Plain takes stop at the table's next row now (or the start given), before the SUBSCRIBE
  // gives the start.
  table_.set_plain_below(std::min(table_.plain_below(), start ? start : table_.ids().upcoming()));
  WriteBatch::Subscribe sub{number, start, name, condition};
  WriteBatch b;
  b.subscribe = &sub;
  CommitRequest req;
  req.batch = b;
  Status st = table_.commit(&req);
  if (st.ok()) {
    auto state = state_.lock();
    auto s = std::make_unique<Sub>();
    s->number = number;
    s->name = std::string(name);
    s->condition = std::string(condition);
    s->filter_known = condition.empty();
    s->start = s->floor = s->free_from = std::max<RowId>(req.batch.subscribed_start, 1);
    state->subs[number] = std::move(s);
    count_.store(state->subs.size());
    advance_floor(*state->subs[number]);
  }
  plain_floor_changed();
  if (!st.ok()) return st;
  if (SubscriptionLog* log = SubscriptionLog::get())
    return log->subscribed(table_, name, condition, std::max<RowId>(req.batch.subscribed_start, 1));
  return st;
}

Status Subscriptions::drop(std::string_view name) { return drop_subscription(name, true); }

Status Subscriptions::apply_unsubscribe(std::string_view name) {
  Status st = drop_subscription(name, false);
  return st.code() == ErrorCode::kNotFound ? Status::Ok() : st;  // applied already
}

Status Subscriptions::drop_subscription(std::string_view name, bool remove_rows) {
  uint32_t number;
  {
    auto state = state_.lock();
    Sub* s = state->by_name(name);
    if (!s)
      return Status(ErrorCode::kNotFound, "table " + table_.path() + ": no subscription '" + std::string(name) + "'");
    number = s->number;
  }
  WriteBatch b;
  b.unsubscribe = number;
  CommitRequest req;
  req.batch = b;
  Status st = table_.commit(&req);
  if (!st.ok()) return st;
  if (SubscriptionLog* log = SubscriptionLog::get()) {
    // Logged before the removals below, which the log names after it.
    if (Status l = log->unsubscribed(table_, name); !l.ok()) st = l;
  }
  std::vector<RowId> candidates;
  std::list<TakeRequest> waiters;
  RowId from = 0;
  {
    auto state = state_.lock();
    Sub* s = state->by_number(number);
    if (!s) return Status::Ok();
    from = s->start;
    state->subs.erase(number);
    count_.store(state->subs.size());
    auto w = waiters_.lock();
    if (auto it = w->find(number); it != w->end()) {
      waiters.swap(it->second);
      w->erase(it);
    }
  }
  for (const TakeRequest& r : waiters) r.receiver->table_dropped("subscription '" + std::string(name) + "' was dropped");
  plain_floor_changed();
  if (!st.ok()) return st;
  // The rows only it still needed: every row from its start on that the others decided. A
  // replica removes none itself: its primary's log names them.
  if (!any() || !remove_rows) return Status::Ok();  // the rows are plain ones again
  RowId id = from - 1;
  for (;;) {
    bool found = false;
    if (!table_.next_row(id, &id, nullptr, &found, nullptr).ok() || !found) break;
    candidates.push_back(id);
    if (candidates.size() >= 4096) {
      std::vector<RowId> gone;
      {
        auto state = state_.lock();
        gone = removable(*state, candidates);
      }
      candidates.clear();
      if (Status s = remove_parent_rows(gone, true, ""); !s.ok()) return s;
    }
  }
  std::vector<RowId> gone;
  {
    auto state = state_.lock();
    gone = removable(*state, candidates);
  }
  return remove_parent_rows(gone, true, "");
}

std::shared_ptr<QueueTable> Subscriptions::find(std::string_view name) {
  auto state = state_.lock();
  Sub* s = state->by_name(name);
  if (!s) return nullptr;
  if (auto t = s->table.lock()) return t;
  auto t = std::make_shared<SubscriptionTable>(table_.shared_from_this(), s->number, s->name);
  s->table = t;
  return t;
}

std::string Subscriptions::condition_of(std::string_view name, bool* found) {
  auto state = state_.lock();
  Sub* s = state->by_name(name);
  *found = s != nullptr;
  return s ? s->condition : std::string();
}

void Subscriptions::set_filter(std::string_view name, std::shared_ptr<const RowFilter> filter) {
  auto state = state_.lock();
  Sub* s = state->by_name(name);
  if (!s || s->filter_known) return;
  s->filter = std::move(filter);
  s->filter_known = true;
}

bool Subscriptions::is_subscription(const QueueTable* t) {
  if (!t || !any()) return false;
  auto state = state_.lock();
  for (auto& [n, s] : state->subs)
    if (s->table.lock().get() == t) return true;
  return false;
}

void Subscriptions::wake(Sub& s, bool all) {
  auto w = waiters_.lock();
  generation_.fetch_add(1);
  auto found = w->find(s.number);
  if (found == w->end()) return;
  std::list<TakeRequest>& waiters = found->second;
  bool woke_plain = false;
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (!all && woke_plain && !it->filter) {
      ++it;
      continue;
    }
    if (it->receiver->waiting()) {
      it->receiver->rescan();
      if (!it->filter) woke_plain = true;
    }
    it = waiters.erase(it);
  }
}

void Subscriptions::row_added() {
  if (!any()) return;
  auto w = waiters_.lock();
  generation_.fetch_add(1);
  // Called under the table's state lock, so state_ cannot be locked: the waiter lists are
  // waiters_' own.
  for (auto& [n, waiters] : *w) {
    bool woke_plain = false;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (woke_plain && !it->filter) {
        ++it;
        continue;
      }
      if (it->receiver->waiting()) {
        it->receiver->rescan();
        if (!it->filter) woke_plain = true;
      }
      it = waiters.erase(it);
    }
  }
}

void Subscriptions::table_dropped(const std::string& message) {
  auto w = waiters_.lock();
  for (auto& [n, waiters] : *w) {
    for (const TakeRequest& r : waiters) r.receiver->table_dropped(message);
    waiters.clear();
  }
}

void Subscriptions::truncated() {
  auto state = state_.lock();
  for (auto& [n, s] : state->subs) {
    s->rows.clear();
    s->gates.clear();
    s->leases.clear();
    s->floor = s->free_from = s->start;
  }
}

void Subscriptions::back_to_queue(Sub& s, RowId id, SubRow& row, std::chrono::milliseconds delay) {
  row.holder = nullptr;
  const uint32_t max = table_.options()->max_deliveries;
  if (row.from_dead || (max != 0 && row.deliveries >= max)) {
    row.state = SubRow::kDead;
    row.from_dead = false;
    s.gates.released(id);  // a dead row holds up nothing
    return;
  }
  if (delay.count() > 0) {
    s.gates.delayed(id);  // keeps its group's place
    row.state = SubRow::kDelayed;
    row.due = std::chrono::steady_clock::now() + delay;
    table_.watch(row.due);
    return;
  }
  row.state = SubRow::kFree;
  s.gates.released(id);  // in line again as a free row
  s.free_from = std::min(s.free_from, id);
}

// After commit_ends(): the rows `ending` left kEnding are ended, or back where they were if it
// failed (owned by their consumer, or dead for a purge).
void Subscriptions::settle_ending(Sub& s, const std::vector<RowId>& ending, bool ok, bool back_dead) {
  for (RowId id : ending) {
    auto it = s.rows.find(id);
    if (it == s.rows.end() || it->second.state != SubRow::kEnding) continue;
    it->second.state = ok ? SubRow::kDone : back_dead ? SubRow::kDead : SubRow::kOwned;
  }
}

void Subscriptions::release_gates(Sub& s, const std::vector<RowId>& ids) {
  bool freed = false;
  for (RowId id : ids) freed = s.gates.released(id) || freed;
  if (freed) wake(s, false);
}

void Subscriptions::return_holder_rows(Sub& s, const Holder* h) {
  for (auto& [id, row] : s.rows)
    if (row.state == SubRow::kOwned && row.holder == h) back_to_queue(s, id, row, std::chrono::milliseconds(0));
}

void Subscriptions::expire(Sub& s, SteadyTime now) {
  bool freed = false;
  for (auto it = s.leases.begin(); it != s.leases.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    return_holder_rows(s, it->first);
    s.lease_expired.insert(it->first);
    if (auto t = s.table.lock()) t->counters().lease_expiries.add();
    it = s.leases.erase(it);
    freed = true;
  }
  for (auto& [id, row] : s.rows) {
    if (row.state != SubRow::kDelayed || row.due > now) continue;
    row.state = SubRow::kFree;
    s.gates.released(id);
    s.free_from = std::min(s.free_from, id);
    freed = true;
  }
  if (freed) wake(s, true);
}

SteadyTime Subscriptions::due(SteadyTime now) {
  SteadyTime next = SteadyTime::max();
  if (!any()) return next;
  auto state = state_.lock();
  for (auto& [n, s] : state->subs) {
    expire(*s, now);
    if (s->gates.token_came(now)) wake(*s, true);  // a rate let a row go
    s->gates.sweep(now);
    next = std::min(next, s->gates.next_token());
    for (auto& [h, at] : s->leases) next = std::min(next, at);
    for (auto& [id, row] : s->rows)
      if (row.state == SubRow::kDelayed) next = std::min(next, row.due);
  }
  return next;
}

QueueTable::Take Subscriptions::take(uint32_t number, const TakeRequest& r, bool register_waiter, bool dead) {
  for (;;) {
    const uint64_t generation = generation_.load();
    std::vector<RowId> gone;
    std::string name;
    std::optional<QueueTable::Take> taken;
    {
      auto state = state_.lock();
      taken = take_locked(*state, number, r, register_waiter, dead, generation, &gone, &name);
    }
    (void)remove_parent_rows(gone, false, name);  // decided again after a crash: no sync
    if (taken) return *taken;  // none: scan again
  }
}

std::optional<QueueTable::Take> Subscriptions::take_locked(State& st, uint32_t number, const TakeRequest& r,
                                                           bool register_waiter, bool dead, uint64_t generation,
                                                           std::vector<RowId>* gone, std::string* name) {
  Sub* s = st.by_number(number);
  if (!s) return QueueTable::Take::kDropped;
  if (table_.dropped_.load()) return QueueTable::Take::kDropped;
  *name = s->name;  // for the log of rows removed, outside state_
  const auto now = std::chrono::steady_clock::now();
  expire(*s, now);
  if (r.more) {  // a batch stops growing once its lease ran out
    if (s->lease_expired.count(r.holder)) return QueueTable::Take::kConsumerDone;
  }
  auto give = [&](RowId id, SubRow& row) {
    const uint32_t deliveries = row.deliveries == UINT16_MAX ? row.deliveries : row.deliveries + 1u;
    if (!r.receiver->accept(r.sub, id, deliveries, row.deliveries)) return false;
    row.deliveries = static_cast<uint16_t>(deliveries);
    row.from_dead = row.state == SubRow::kDead;
    row.state = SubRow::kOwned;
    row.holder = r.holder;
    row.taken_at = now;
    s->delivered++;
    if (r.lease_ms > 0 && !r.more) {
      const SteadyTime at = now + std::chrono::milliseconds(r.lease_ms);
      s->leases[r.holder] = at;
      table_.watch(at);
    }
    return true;
  };
  if (dead) {
    for (auto& [id, row] : s->rows)
      if (row.state == SubRow::kDead)
        return give(id, row) ? QueueTable::Take::kTaken : QueueTable::Take::kConsumerDone;
    return QueueTable::Take::kNone;
  }
  advance_floor(*s);
  s->gates.configure(*table_.options(), now);
  if (s->filter_known && s->gates.open(now)) {
    RowId id = std::max(s->free_from, s->floor) - 1;
    bool all_before_taken = true;  // every row scanned so far is not free (free_from may move)
    std::vector<RowId> excluded;
    std::string payload;
    SubscriptionGates::Scan scan;
    Table::SubscriptionRow next;
    auto live = [&](RowId held) { return table_.row_view(held, nullptr) != QueueTable::RowView::kGone; };
    while (table_.next_for_subscription(id, &next)) {
      id = next.id;
      const std::string* key = next.grouped ? &next.key : nullptr;
      auto it = s->rows.find(id);
      if (it != s->rows.end() && it->second.state != SubRow::kFree) {
        if (all_before_taken) s->free_from = id + 1;
        continue;
      }
      if (st.removing.count(id)) continue;
      bool have_payload = false;
      auto read = [&]() {
        bool there = false;
        have_payload = table_.read_row(id, &payload, &there, nullptr).ok() && there;
        return have_payload;
      };
      if (s->filter) {
        if (!read()) continue;
        if (!s->filter->matches(payload)) {  // not this subscription's row
          s->rows[id].state = SubRow::kDone;
          excluded.push_back(id);
          if (all_before_taken) s->free_from = id + 1;
          continue;
        }
      }
      // In the subscription's line from here on: a row it does not take now holds its
      // group's later rows back.
      if (!next.visible || !s->gates.allows(scan, id, key, now, live) ||
          (r.filter && ((!have_payload && !read()) || !r.filter->matches(payload)))) {
        s->gates.passed(scan, key);
        all_before_taken = false;
        continue;
      }
      SubRow& row = s->rows[id];
      if (!give(id, row)) {
        if (row.state == SubRow::kFree && row.deliveries == 0 && !row.from_dead) s->rows.erase(id);
        *gone = removable(st, excluded);
        return QueueTable::Take::kConsumerDone;
      }
      s->gates.handed_out(id, key, now);
      if (all_before_taken) s->free_from = id + 1;
      *gone = removable(st, excluded);
      return QueueTable::Take::kTaken;
    }
    *gone = removable(st, excluded);
    if (!gone->empty()) return std::nullopt;  // scan again (rare: a table of rows outside the condition)
  }
  if (s->gates.next_token() != SteadyTime::max()) table_.watch(s->gates.next_token());
  if (!register_waiter) return QueueTable::Take::kNone;
  if (!r.receiver->waiting()) return QueueTable::Take::kConsumerDone;
  auto w = waiters_.lock();
  if (generation_.load() != generation) return std::nullopt;  // a row came meanwhile: scan again
  (*w)[number].push_back(r);
  return QueueTable::Take::kRegistered;
}

void Subscriptions::unregister(uint32_t number, const Receiver* r) {
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return;
  auto w = waiters_.lock();
  if (auto it = w->find(number); it != w->end())
    it->second.remove_if([&](const TakeRequest& t) { return t.receiver == r; });
}

Status Subscriptions::end_rows(uint32_t number, const Holder* h, const RowId* ids, size_t count) {
  std::vector<RowId> ending, gone;
  bool sync = h->sync_removals();
  {
    auto state = state_.lock();
    Sub* s = state->by_number(number);
    if (!s) return Status::Ok();  // dropped: nothing to end
    for (size_t i = 0; i < count; i++) {
      auto it = s->rows.find(ids[i]);
      if (it == s->rows.end() || it->second.state != SubRow::kOwned || it->second.holder != h) continue;
      it->second.state = SubRow::kEnding;
      ending.push_back(ids[i]);
    }
    if (ending.empty()) return Status::Ok();
    gone = removable(*state, ending);
  }
  Status st = commit_ends(number, ending, gone, sync);
  std::string name;
  {
    auto state = state_.lock();
    for (RowId id : gone) state->removing.erase(id);
    Sub* s = state->by_number(number);
    if (!s) return st;
    settle_ending(*s, ending, st.ok(), /*back_dead=*/false);
    if (!st.ok()) return st.code() == ErrorCode::kDropped ? Status::Ok() : st;
    s->ended += ending.size();
    release_gates(*s, ending);
    advance_floor(*s);
    name = s->name;
  }
  return log_ended(table_, name, std::move(ending), std::move(gone));
}

Status Subscriptions::apply_ends(std::string_view name, const std::vector<RowId>& ended,
                                 const std::vector<RowId>& removed) {
  std::vector<RowId> ending, gone;
  uint32_t number = 0;
  {
    auto state = state_.lock();
    // No such subscription: its end was logged after its drop (each is logged at the end of its
    // own statement, so an end committed before a drop on another connection may follow it).
    // The primary dropped it too: only the removals count.
    Sub* s = name.empty() ? nullptr : state->by_name(name);
    if (s) {
      number = s->number;
      for (RowId id : ended) {
        if (decided(*s, id) || table_.row_view(id, nullptr) == QueueTable::RowView::kGone) continue;
        s->rows[id].state = SubRow::kEnding;  // held by nobody here: a replica hands out nothing
        s->rows[id].holder = nullptr;
        ending.push_back(id);
      }
    }
    for (RowId id : removed) {
      if (state->removing.count(id) || table_.row_view(id, nullptr) == QueueTable::RowView::kGone) continue;
      state->removing.insert(id);
      gone.push_back(id);
    }
  }
  Status st = Status::Ok();
  if (!ending.empty() || !gone.empty()) st = commit_ends(number, ending, gone, true);
  {
    auto state = state_.lock();
    for (RowId id : gone) state->removing.erase(id);
    if (Sub* s = number ? state->by_number(number) : nullptr) {
      for (RowId id : ending) {
        auto it = s->rows.find(id);
        if (it == s->rows.end() || it->second.state != SubRow::kEnding) continue;
        if (st.ok()) it->second.state = SubRow::kDone;
        else s->rows.erase(it);
      }
      if (st.ok()) {
        s->ended += ending.size();
        advance_floor(*s);
      }
    }
  }
  if (!st.ok()) return st;
  return log_ended(table_, name, ended, removed);  // as the primary named them: for a chained replica
}

// ---- Ends in a transaction ---------------------------------------------------------------
//
// queue_end() of a subscription's row inside an explicit transaction (or XA) joins it, as a
// plain end does: the row stays the subscription's, held by the transaction (kOwned by its
// holder: no take hands it out, no lease runs out, and it is not decided, so no other
// subscription's end removes it) until the transaction ends. The rows this end leaves decided
// by every subscription are claimed in the table now, for the same commit. The transaction's
// part in the table is a TXN_SUB_REMOVE (this subscription's ends) and a TXN_REMOVE (those
// rows) with its TXN_PREPARE: it commits with the transaction's InnoDB rows, rolls back with
// them, and recovery keeps it prepared until the coordinator decides (restore_parts()). A
// rollback gives the rows back to the subscription as queue_abort() does. The log (the binary
// log's transaction cache) names the ends and removals when they join the transaction, so a
// replica applies them with the transaction's other changes.

Status Subscriptions::claim_ends(uint32_t number, const Holder* owner, const RowId* ids, size_t count,
                                 const Holder* txn) {
  std::vector<RowId> ended, gone;
  std::string name;
  {
    auto state = state_.lock();
    Sub* s = state->by_number(number);
    if (!s) return Status::Ok();  // dropped: nothing to end
    expire(*s, std::chrono::steady_clock::now());
    if (s->lease_expired.erase(owner))
      return Status(ErrorCode::kLeaseExpired, "subscription '" + s->name +
                                                  "': the lease of the owned row ran out: it went back to the "
                                                  "subscription, not ended");
    s->leases.erase(owner);  // the transaction holds the rows now: no lease runs out
    for (size_t i = 0; i < count; i++) {
      auto it = s->rows.find(ids[i]);
      if (it == s->rows.end() || it->second.state != SubRow::kOwned || it->second.holder != owner) continue;
      it->second.holder = txn;
      ended.push_back(ids[i]);
    }
    if (ended.empty()) return Status::Ok();
    for (RowId id : ended) {  // decided by every other subscription: removed by this commit
      if (state->removing.count(id)) continue;
      bool others = true;
      for (auto& [n, o] : state->subs)
        if (o.get() != s && !decided(*o, id)) {
          others = false;
          break;
        }
      if (!others) continue;
      state->removing.insert(id);
      gone.push_back(id);
    }
    TxnEnds& t = state->txn_ends[{txn, number}];
    t.ended.insert(t.ended.end(), ended.begin(), ended.end());
    t.removed.insert(t.removed.end(), gone.begin(), gone.end());
    name = s->name;
  }
  table_.claim_queued(gone, txn);
  if (SubscriptionLog* log = SubscriptionLog::get()) {
    std::vector<RowId> e = ended, g = gone;
    std::sort(e.begin(), e.end());
    std::sort(g.begin(), g.end());
    Status st = log->ended_in_transaction(table_, name, e, g);
    if (!st.ok()) {
      release_ends(number, txn, ended.data(), ended.size());
      return st;
    }
  }
  return Status::Ok();
}

void Subscriptions::release_ends(uint32_t number, const Holder* txn, const RowId* ids, size_t count) {
  std::vector<RowId> unclaim;  // table rows claimed for their removal
  {
    auto state = state_.lock();
    auto it = state->txn_ends.find({txn, number});
    if (it == state->txn_ends.end()) return;
    TxnEnds& t = it->second;
    std::vector<RowId> back = ids ? std::vector<RowId>(ids, ids + count) : t.ended;
    for (RowId id : back) {
      t.ended.erase(std::remove(t.ended.begin(), t.ended.end(), id), t.ended.end());
      auto r = std::find(t.removed.begin(), t.removed.end(), id);
      if (r == t.removed.end()) continue;
      t.removed.erase(r);
      state->removing.erase(id);
      unclaim.push_back(id);
    }
    if (t.ended.empty()) state->txn_ends.erase(it);
    if (Sub* s = state->by_number(number)) {
      bool any_back = false;
      for (RowId id : back) {
        auto r = s->rows.find(id);
        if (r == s->rows.end() || r->second.state != SubRow::kOwned || r->second.holder != txn) continue;
        back_to_queue(*s, id, r->second, std::chrono::milliseconds(0));
        any_back = true;
      }
      if (any_back) wake(*s, true);
    }
  }
  if (!unclaim.empty()) table_.release_claims(txn, unclaim.data(), unclaim.size());
}

std::vector<RowId> Subscriptions::take_own_claims(const Holder* txn, std::vector<RowId> mine) {
  std::sort(mine.begin(), mine.end());
  std::vector<RowId> out, others;
  for (RowId id : table_.take_claims(txn))
    (std::binary_search(mine.begin(), mine.end(), id) ? out : others).push_back(id);
  table_.restore_claims(txn, others);
  return out;
}

// Writes the ends `t` of subscription `number` (SUB_REMOVE records, and the REMOVE of the rows
// they leave decided) as `req`'s batch. Nothing written: the ends and claims are the
// transaction's again.
Status Subscriptions::commit_txn_part(uint32_t number, const Holder* txn, const TxnEnds& t, CommitRequest* req) {
  std::vector<RowId> removals = take_own_claims(txn, t.removed);
  req->batch.sub = number;
  req->batch.sub_removals = t.ended.data();
  req->batch.sub_removal_count = t.ended.size();
  req->batch.removals = removals.data();
  req->batch.removal_count = removals.size();
  req->batch.remover = txn;
  Status st = table_.commit(req);
  if (st.ok()) return st;
  table_.restore_claims(txn, removals);
  auto state = state_.lock();
  TxnEnds& back = state->txn_ends[{txn, number}];
  back.ended.insert(back.ended.end(), t.ended.begin(), t.ended.end());
  back.removed.insert(back.removed.end(), t.removed.begin(), t.removed.end());
  return st;
}

bool Subscriptions::take_txn_ends(uint32_t number, const Holder* txn, TxnEnds* t) {
  auto state = state_.lock();
  auto it = state->txn_ends.find({txn, number});
  if (it == state->txn_ends.end()) return false;
  *t = std::move(it->second);
  state->txn_ends.erase(it);
  return true;
}

Status Subscriptions::prepare_ends(uint32_t number, const Holder* txn, std::string_view xid, uint64_t* id) {
  *id = 0;
  TxnEnds t;
  if (!take_txn_ends(number, txn, &t)) return Status::Ok();
  CommitRequest req;
  req.batch.phase = WriteBatch::Phase::kPrepare;
  req.batch.xid = xid;
  Status st = commit_txn_part(number, txn, t, &req);
  if (!st.ok()) return st;  // the ends are the transaction's again (its rollback follows)
  auto state = state_.lock();
  *id = req.batch.txn;
  PartEnds& p = state->part_ends[req.batch.txn];
  p.sub = number;
  p.holder = std::make_unique<Holder>(txn->connection_id());
  if (Sub* s = state->by_number(number))  // held by the part now: its connection may go (XA)
    for (RowId r : t.ended) {
      auto it = s->rows.find(r);
      if (it != s->rows.end() && it->second.state == SubRow::kOwned && it->second.holder == txn)
        it->second.holder = p.holder.get();
    }
  p.ended = std::move(t.ended);
  p.removed = std::move(t.removed);
  p.applied = t.applied;
  part_count_.store(state->part_ends.size());
  return st;
}

Status Subscriptions::commit_txn_ends(uint32_t number, const Holder* txn) {
  TxnEnds t;
  if (!take_txn_ends(number, txn, &t)) return Status::Ok();
  CommitRequest req;
  Status st = commit_txn_part(number, txn, t, &req);
  if (!st.ok()) return st;  // the transaction's again, for its rollback
  settle_ends(number, t.ended, t.removed, txn, true, !t.applied);
  return st;
}

void Subscriptions::settle_ends(uint32_t number, const std::vector<RowId>& ended, const std::vector<RowId>& removed,
                                const Holder* holder, bool committed, bool recheck) {
  std::vector<RowId> gone;
  std::string name;
  {
    auto state = state_.lock();
    for (RowId id : removed) state->removing.erase(id);
    Sub* s = state->by_number(number);
    if (!s) return;
    for (RowId id : ended) {
      auto it = s->rows.find(id);
      if (it == s->rows.end() || it->second.state != SubRow::kOwned || it->second.holder != holder) continue;
      if (committed)
        it->second.state = SubRow::kDone;
      else
        back_to_queue(*s, id, it->second, std::chrono::milliseconds(0));
    }
    if (!committed) {
      wake(*s, true);
      return;
    }
    s->ended += ended.size();
    release_gates(*s, ended);  // their groups' next rows may go now
    // A row another subscription ended meanwhile (it left this one's to remove it): all
    // decided now.
    std::vector<RowId> live;
    for (RowId id : ended)
      if (recheck && table_.row_view(id, nullptr) != QueueTable::RowView::kGone) live.push_back(id);
    gone = removable(*state, live);
    advance_floor(*s);
    name = s->name;
  }
  if (!gone.empty()) (void)remove_parent_rows(gone, false, name);
}

Status Subscriptions::apply_ends_in(Transaction& txn, std::string_view name, const std::vector<RowId>& ended,
                                    const std::vector<RowId>& removed) {
  std::shared_ptr<QueueTable> table = name.empty() ? nullptr : find(name);
  if (!table) return apply_ends(name, ended, removed);
  const uint32_t number = static_cast<SubscriptionTable&>(*table).number();
  const Holder* h = &txn.holder();
  std::vector<RowId> ending, gone;
  {
    auto state = state_.lock();
    Sub* s = state->by_number(number);
    if (!s) return Status::Ok();  // dropped meanwhile: as apply_ends() with no subscription
    for (RowId id : ended) {
      if (decided(*s, id) || table_.row_view(id, nullptr) == QueueTable::RowView::kGone) continue;
      SubRow& row = s->rows[id];
      if (row.state == SubRow::kOwned) continue;  // held already (applied in an open transaction)
      row.state = SubRow::kOwned;  // held by the transaction; a replica hands out nothing
      row.holder = h;
      ending.push_back(id);
    }
    if (!ending.empty()) {
      for (RowId id : removed) {
        if (state->removing.count(id) || table_.row_view(id, nullptr) == QueueTable::RowView::kGone) continue;
        state->removing.insert(id);
        gone.push_back(id);
      }
      TxnEnds& t = state->txn_ends[{h, number}];
      t.ended.insert(t.ended.end(), ending.begin(), ending.end());
      t.removed.insert(t.removed.end(), gone.begin(), gone.end());
      t.applied = true;
    }
  }
  if (ending.empty()) return apply_ends(name, {}, removed);  // applied already: the removals, at once
  table_.claim_queued(gone, h);
  txn.note_claims(table, ending);
  if (SubscriptionLog* log = SubscriptionLog::get()) {  // as the primary named them: for a chained replica
    Status st = log->ended_in_transaction(table_, name, ended, removed);
    if (!st.ok()) {
      txn.rollback_to(txn.mark() - ending.size());
      return st;
    }
  }
  return Status::Ok();
}

void Subscriptions::part_ended(uint64_t id, bool committed) {
  if (part_count_.load(std::memory_order_acquire) == 0) return;
  PartEnds p;
  {
    auto state = state_.lock();
    auto it = state->part_ends.find(id);
    if (it == state->part_ends.end()) return;
    p = std::move(it->second);
    state->part_ends.erase(it);
    part_count_.store(state->part_ends.size());
  }
  settle_ends(p.sub, p.ended, p.removed, p.holder.get(), committed, !p.applied);
}

void Subscriptions::restore_parts(const std::map<uint64_t, PreparedPart>& parts) {
  auto state = state_.lock();
  for (const auto& [id, part] : parts) {
    if (part.sub_removals.empty()) continue;
    PartEnds& p = state->part_ends[id];
    p.sub = part.sub;
    p.holder = std::make_unique<Holder>();
    Sub* s = state->by_number(part.sub);
    for (RowId r : part.sub_removals) {
      if (!s || r < s->start || table_.row_view(r, nullptr) == QueueTable::RowView::kGone) continue;
      SubRow& row = s->rows[r];  // held by the part, as before the restart
      row.state = SubRow::kOwned;
      row.holder = p.holder.get();
      p.ended.push_back(r);
    }
    for (RowId r : part.removals) {
      state->removing.insert(r);
      p.removed.push_back(r);
    }
  }
  part_count_.store(state->part_ends.size());
}

void Subscriptions::keep_part(ReplacementFile& out, uint64_t id) {
  if (part_count_.load(std::memory_order_acquire) == 0) return;
  auto state = state_.lock();
  auto it = state->part_ends.find(id);
  if (it == state->part_ends.end() || it->second.ended.empty()) return;
  out.add_txn_sub_remove(id, it->second.sub, it->second.ended);
}

size_t Subscriptions::abort_rows(uint32_t number, const Holder* h, const RowId* ids, size_t count,
                                 std::chrono::milliseconds delay) {
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return 0;
  s->leases.erase(h);
  s->lease_expired.erase(h);
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    auto it = s->rows.find(ids[i]);
    if (it == s->rows.end() || it->second.state != SubRow::kOwned || it->second.holder != h) continue;
    back_to_queue(*s, ids[i], it->second, delay);
    n++;
  }
  if (n) wake(*s, true);
  return n;
}

Status Subscriptions::settle_lease(uint32_t number, const Holder* h) {
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return Status::Ok();
  expire(*s, std::chrono::steady_clock::now());
  if (s->lease_expired.erase(h))
    return Status(ErrorCode::kLeaseExpired, "subscription '" + s->name + "': the lease of the owned row ran out: it went back to the subscription, not ended");
  s->leases.erase(h);
  return Status::Ok();
}

Status Subscriptions::renew_lease(uint32_t number, const Holder* h, std::chrono::milliseconds lease) {
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return Status::Ok();
  expire(*s, std::chrono::steady_clock::now());
  if (s->lease_expired.erase(h))
    return Status(ErrorCode::kLeaseExpired, "subscription '" + s->name + "': the lease of the owned row ran out");
  const SteadyTime at = std::chrono::steady_clock::now() + lease;
  s->leases[h] = at;
  table_.watch(at);
  return Status::Ok();
}

Status Subscriptions::release_owned(uint32_t number, RowId id, uint64_t by_connection, size_t* released) {
  *released = 0;
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return Status::Ok();
  auto it = s->rows.find(id);
  // A row being ended (kEnding) is not taken from its owner: the end wins.
  if (it == s->rows.end() || it->second.state != SubRow::kOwned) return Status::Ok();
  const Holder* h = it->second.holder;
  for (auto& [rid, row] : s->rows)
    if (row.state == SubRow::kOwned && row.holder == h) ++*released;
  return_holder_rows(*s, h);
  s->leases.erase(h);
  if (h) h->revoke(by_connection);  // its owner's next end learns it (Consumer)
  if (auto t = s->table.lock()) t->counters().rows_released.add(*released);
  wake(*s, true);
  return Status::Ok();
}

Status Subscriptions::redrive_dead(uint32_t number, size_t max, size_t* moved) {
  *moved = 0;
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return Status::Ok();
  for (auto& [id, row] : s->rows) {
    if (*moved >= max) break;
    if (row.state != SubRow::kDead) continue;
    row.state = SubRow::kFree;
    row.deliveries = 0;
    s->free_from = std::min(s->free_from, id);
    ++*moved;
  }
  if (auto t = s->table.lock()) t->counters().rows_redriven.add(*moved);
  if (*moved) wake(*s, true);
  return Status::Ok();
}

Status Subscriptions::purge_dead(uint32_t number, size_t max, size_t* purged) {
  *purged = 0;
  std::vector<RowId> ending, gone;
  std::string name;
  {
    auto state = state_.lock();
    Sub* s = state->by_number(number);
    if (!s) return Status::Ok();
    name = s->name;
    for (auto& [id, row] : s->rows) {
      if (ending.size() >= max) break;
      if (row.state != SubRow::kDead) continue;
      row.state = SubRow::kEnding;
      ending.push_back(id);
    }
    if (ending.empty()) return Status::Ok();
    gone = removable(*state, ending);
  }
  Status st = commit_ends(number, ending, gone, true);
  {
    auto state = state_.lock();
    for (RowId id : gone) state->removing.erase(id);
    Sub* s = state->by_number(number);
    if (!s) return st;
    settle_ending(*s, ending, st.ok(), /*back_dead=*/true);
    if (!st.ok()) return st;
    *purged = ending.size();
    if (auto t = s->table.lock()) t->counters().rows_purged.add(*purged);
    advance_floor(*s);
  }
  return log_ended(table_, name, std::move(ending), std::move(gone));
}

std::vector<OwnedRowInfo> Subscriptions::owned_rows(uint32_t number) {
  std::vector<OwnedRowInfo> out;
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  if (!s) return out;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, row] : s->rows) {
    if (row.state != SubRow::kOwned) continue;
    OwnedRowInfo i;
    i.id = id;
    i.connection_id = row.holder ? row.holder->connection_id() : 0;
    i.deliveries = row.deliveries;
    i.owned_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now - row.taken_at).count());
    RowId at = 0;
    bool found = false;
    RowHistory history;
    if (table_.next_row(id - 1, &at, nullptr, &found, &history).ok() && found && at == id && history.insert_time_ms)
      i.row_age_ms = wall_ms() > history.insert_time_ms ? wall_ms() - history.insert_time_ms : 0;
    auto l = s->leases.find(row.holder);
    if (l != s->leases.end())
      i.lease_left_ms = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(l->second - now).count());
    out.push_back(i);
  }
  return out;
}

void Subscriptions::fill_info(Sub& s, SubscriptionInfo* out) {
  out->name = s.name;
  out->condition = s.condition;
  out->number = s.number;
  out->start = s.start;
  out->rows_delivered = s.delivered;
  out->rows_ended = s.ended;
  {
    auto w = waiters_.lock();
    auto it = w->find(s.number);
    out->waiters = it == w->end() ? 0 : it->second.size();
  }
  uint64_t done = 0;
  for (auto& [id, row] : s.rows) {
    switch (row.state) {
      case SubRow::kOwned:
      case SubRow::kEnding:
        out->owned_rows++;
        break;
      case SubRow::kDelayed:
        out->delayed_rows++;
        break;
      case SubRow::kDead:
        out->dead_rows++;
        break;
      case SubRow::kDone:
        done++;
        break;
      default:
        break;
    }
  }
  // Live rows of the table from its floor on, less those it decided.
  RowId id = s.floor - 1;
  bool found = false;
  RowHistory h;
  uint64_t live = 0;
  if (table_.next_row(id, &id, nullptr, &found, &h).ok() && found) {
    const uint64_t now = wall_ms();
    out->oldest_age_ms = now > h.insert_time_ms ? now - h.insert_time_ms : 1;
    live = table_.live_rows_from(id);
  }
  out->pending_rows = live > done ? live - done : 0;
}

SubscriptionInfo Subscriptions::info(uint32_t number, bool* found) {
  SubscriptionInfo i;
  auto state = state_.lock();
  Sub* s = state->by_number(number);
  *found = s != nullptr;
  if (s) {
    expire(*s, std::chrono::steady_clock::now());
    advance_floor(*s);
    fill_info(*s, &i);
  }
  return i;
}

std::vector<SubscriptionInfo> Subscriptions::list() {
  std::vector<SubscriptionInfo> out;
  if (!any()) return out;
  auto state = state_.lock();
  const auto now = std::chrono::steady_clock::now();
  for (auto& [n, s] : state->subs) {
    expire(*s, now);
    advance_floor(*s);
    out.emplace_back();
    fill_info(*s, &out.back());
  }
  return out;
}

void Subscriptions::keep(ReplacementFile& out, const std::function<bool(RowId)>& live) {
  auto state = state_.lock();
  for (auto& [n, s] : state->subs) {
    out.add_subscribe(s->number, s->start, s->name, s->condition);
    // Live rows below its floor are decided (ended, or outside its condition: recorded as
    // ended, which is the same to it), then those above it ended.
    std::vector<RowId> ended;
    RowId id = s->start - 1;
    bool found = false;
    while (table_.next_row(id, &id, nullptr, &found, nullptr).ok() && found && id < s->floor) ended.push_back(id);
    for (auto& [id, row] : s->rows)
      if ((row.state == SubRow::kDone || row.state == SubRow::kEnding) && live(id)) ended.push_back(id);
    if (!ended.empty()) out.add_sub_remove(s->number, ended);
  }
}

}  // namespace q4m
