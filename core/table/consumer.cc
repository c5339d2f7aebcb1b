// Consumer: owner mode and queue_wait().
#include "core/table/consumer.h"

#include <algorithm>
#include <optional>

#include "core/util/blocking.h"

#include "core/table/consumer_impl.h"
#include "core/table/transaction.h"

namespace q4m {

bool Consumer::Impl::accept(int sub_index, RowId id, uint32_t deliveries, uint32_t prior_deliveries) {
  auto mb = mailbox.lock();
  if (!mb->waiting || mb->handed) return false;  // never two rows for one wait
  mb->handed = true;
  mb->waiting = false;
  mb->handed_sub = sub_index;
  mb->handed_rowid = id;
  mb->handed_deliveries = deliveries;
  mb->handed_prior_deliveries = prior_deliveries;
  wake.notify_one();
  return true;
}

void Consumer::Impl::rescan() {
  auto mb = mailbox.lock();
  if (!mb->waiting || mb->handed) return;
  mb->rescan = true;
  wake.notify_one();
}

void Consumer::Impl::table_dropped(const std::string& message) {
  auto mb = mailbox.lock();
  if (!mb->waiting || mb->dropped) return;
  mb->dropped = true;
  mb->dropped_message = message;
  wake.notify_one();
}

Consumer::Consumer(uint64_t connection_id) : impl_(new Impl(connection_id)) {}

Consumer::~Consumer() { release(); }

uint64_t Consumer::connection_id() const { return impl_->holder.connection_id(); }
const Holder& Consumer::holder() const { return impl_->holder; }

View Consumer::view() const {
  const Impl& c = *impl_;
  View v;
  v.holder = &c.holder;
  v.owned_in = c.owned_table.load(std::memory_order_acquire);
  if (!v.owned_in) {
    v.owns_nothing = c.owns_nothing.load(std::memory_order_relaxed);
    v.sees_held = c.sees_held;
    return v;
  }
  v.owned = c.owned_rowid.load(std::memory_order_acquire);
  if (!c.batch_ids.empty()) v.batch = &c.batch_ids;
  return v;
}

void Consumer::set_sees_held(bool sees) { impl_->sees_held = sees; }

void Consumer::claimed_in(std::weak_ptr<QueueTable> table) {
  auto tables = impl_->claim_tables.lock();
  const QueueTable* t = table.lock().get();
  for (auto& w : *tables)
    if (w.lock().get() == t) return;
  tables->push_back(std::move(table));
}
bool Consumer::owner_mode() const { return impl_->owned_table.load() != nullptr || impl_->owns_nothing.load(); }
QueueTable* Consumer::owned_table() const { return impl_->owned_table.load(); }
RowId Consumer::owned_rowid() const { return impl_->owned_rowid.load(); }
uint32_t Consumer::owned_delivery_count() const { return delivery_count_of(owned_rowid()); }
size_t Consumer::owned_count() const { return impl_->owned_table.load() ? OwnedIds(*impl_).size() : 0; }
uint32_t Consumer::delivery_count_of(RowId id) const {
  const Impl& c = *impl_;
  if (!c.owned_table.load() || c.holder.rows_moved()) return 0;  // moved rows may be others' now
  if (c.batch_ids.empty()) return id == c.owned_rowid.load() ? c.owned_deliveries : 0;
  auto it = std::lower_bound(c.batch_ids.begin(), c.batch_ids.end(), id);
  return it != c.batch_ids.end() && *it == id ? c.batch_deliveries[static_cast<size_t>(it - c.batch_ids.begin())] : 0;
}

Status end_owned(Consumer::Impl& c, bool frees_slot);

namespace {

void leave_owner_mode(Consumer::Impl& c) {
  c.owns_nothing.store(false);
  c.owned_table.store(nullptr);
  c.owned_rowid.store(0);
  c.owned.reset();
  c.batch_ids.clear();
  c.batch_deliveries.clear();
  c.leased = false;
  c.holder.clear_revoked();  // told (or nothing to tell)
  c.holder.clear_row_set_aside();
  c.holder.clear_rows_moved();
}

// After a row of `table` was handed to c's wait (mailbox `handed`).
void enter_owner_mode(Consumer::Impl& c, const std::shared_ptr<QueueTable>& table,
                      const Consumer::Impl::Mailbox& handed) {
  c.owned = table;
  c.owned_rowid.store(handed.handed_rowid);
  c.owned_deliveries = handed.handed_deliveries;
  c.leased = c.lease_ms > 0;
  c.owned_table.store(c.owned.get());
}

// Gives every owned row still held back to the queue (those a lease expiry returned
// already, or a DELETE removed, are skipped by the table). Returns how many went back.
size_t return_owned_rows(Consumer::Impl& c, std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
  const OwnedIds ids(c);
  return c.owned->abort_rows(&c.holder, ids.begin(), ids.size(), delay);
}

// The owned rows moved with a copying ALTER TABLE that could not keep them owned (the table
// left the engine: Holder::rows_moved): any still held are given back, owner mode is left,
// and the caller is told that none was removed.
Status leave_after_rows_moved(Consumer::Impl& c) {
  const OwnedIds ids(c);
  const std::string rows = ids.size() > 1 ? "the batch of " + std::to_string(ids.size()) + " rows from row " +
                                                std::to_string(ids.front()) + " was"
                                          : "row " + std::to_string(ids.front()) + " was";
  return_owned_rows(c);
  leave_owner_mode(c);
  return Status(ErrorCode::kRowsMoved,
                "ALTER TABLE moved the table's rows without keeping them owned by this connection: " + rows +
                    " not removed");
}

// After the owned rows' lease ran out: the rows of a batch whose own deadlines were still
// ahead go back too (the expired one is back already), then owner mode is left.
void leave_after_expiry(Consumer::Impl& c) {
  if (!c.batch_ids.empty()) return_owned_rows(c);
  leave_owner_mode(c);
}

Status not_owner(const char* fn) {
  return Status(ErrorCode::kNotOwner, std::string(fn) + ": this connection does not own a row");
}

// A deadline far enough for any timeout without overflowing the clock.
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  const auto cap = std::chrono::hours(24 * 365 * 10);
  auto now = std::chrono::steady_clock::now();
  return timeout > cap ? now + cap : now + timeout;
}

}  // namespace

void Consumer::set_lease(std::chrono::milliseconds lease) { impl_->lease_ms = lease.count(); }
void Consumer::set_transaction(Transaction* txn) { impl_->txn = txn; }
void Consumer::set_sync_removals(bool sync) { impl_->holder.set_sync_removals(sync); }
bool Consumer::sync_removals() const { return impl_->holder.sync_removals(); }

Status Consumer::renew_lease(std::chrono::milliseconds lease) {
  Impl& c = *impl_;
  if (!c.owned) return not_owner("queue_renew_lease()");
  if (lease.count() <= 0) return Status(ErrorCode::kInvalid, "queue_renew_lease(): the lease must be > 0");
  if (c.holder.rows_moved()) return leave_after_rows_moved(c);
  const OwnedIds ids(c);
  if (c.holder.revoked_by()) {
    Status s = revoked_status(c.holder, ids.front(), ids.size());
    leave_after_expiry(c);
    return s;
  }
  Status s = c.owned->renew_lease(&c.holder, ids.begin(), ids.size(), lease);
  if (s.code() == ErrorCode::kLeaseExpired) {
    leave_after_expiry(c);
    return s;
  }
  c.leased = true;
  return s;
}

Status Consumer::end() { return end_owned(*impl_, false); }

// queue_end(), or (frees_slot) the end inside the next take: see QueueTable::claim_owned.
Status end_owned(Consumer::Impl& c, bool frees_slot) {
  if (!c.owned) return c.owns_nothing.exchange(false) ? Status::Ok() : not_owner("queue_end()");
  if (c.holder.rows_moved()) return leave_after_rows_moved(c);
  if (c.holder.row_set_aside()) {
    // An owned row's bytes were damaged: the table set it aside, and the statement that read
    // it failed, so it returned none of this consumer's rows. Nothing is removed; the rest of
    // a batch goes back to the queue, as with abort().
    return_owned_rows(c);
    leave_owner_mode(c);
    return Status::Ok();
  }
  const OwnedIds ids(c);
  if (c.holder.revoked_by()) {  // another connection gave the rows back (queue_release_owned)
    Status s = revoked_status(c.holder, ids.front(), ids.size());
    leave_after_expiry(c);
    return s;
  }
  if (c.txn && (c.owned->ends_in_transactions() || c.txn->whole())) {  // the transaction removes them at its commit (its claim settles the lease)
    Status s = c.txn->remove_owned(c.owned, c.holder, ids.begin(), ids.size(), frees_slot);
    if (s.code() == ErrorCode::kLeaseExpired) {
      leave_after_expiry(c);
      return s;
    }
    if (!s.ok()) return s;
    c.owned->counters().ends.add();
    global_stats().ends.add();
    leave_owner_mode(c);
    return Status::Ok();
  }
  if (c.leased) {
    Status s = c.owned->settle_lease(&c.holder, ids.front(), ids.size());
    if (!s.ok()) {
      leave_after_expiry(c);
      return s;
    }
    c.leased = false;  // settled: it can no longer run out under the removal
  }
  Status s = c.owned->end_rows(&c.holder, ids.begin(), ids.size());  // a batch: one commit
  if (s.code() == ErrorCode::kLeaseExpired) {  // given back by another connection meanwhile
    leave_after_expiry(c);
    return s;
  }
  if (!s.ok()) return s;  // still in owner mode: no row was removed
  // A drop under ALTER TABLE that took the rows out of the engine came first: none was removed.
  if (c.holder.rows_moved()) return leave_after_rows_moved(c);
  c.owned->counters().rows_consumed.add(ids.size());
  c.owned->counters().ends.add();
  global_stats().ends.add();
  leave_owner_mode(c);
  return Status::Ok();
}

Status Consumer::abort(std::chrono::milliseconds delay) {
  Impl& c = *impl_;
  if (!c.owned) return c.owns_nothing.exchange(false) ? Status::Ok() : not_owner("queue_abort()");
  c.owned->counters().rows_aborted.add(return_owned_rows(c, delay));
  c.owned->counters().aborts.add();
  global_stats().aborts.add();
  leave_owner_mode(c);
  return Status::Ok();
}

void Consumer::release() {
  Impl& c = *impl_;
  if (c.owned) {
    c.owned->counters().rows_aborted.add(return_owned_rows(c));
    global_stats().disconnect_returns.add();
  }
  leave_owner_mode(c);
  std::vector<std::weak_ptr<QueueTable>> tables;
  tables.swap(*c.claim_tables.lock());
  for (auto& w : tables)
    if (auto t = w.lock()) t->release_claims(&c.holder);
}

void Consumer::interrupt() {
  auto mb = impl_->mailbox.lock();
  mb->interrupt_pending = true;
  impl_->wake.notify_one();
}

void Consumer::clear_interrupt() { impl_->mailbox.lock()->interrupt_pending = false; }

namespace {

Status interrupted_status() {
  global_stats().wait_interrupts.add();
  return Status(ErrorCode::kInterrupted, "queue_wait(): interrupted");
}

// Consumes a pending interrupt (caller holds the mailbox lock).
Status take_interrupt(Consumer::Impl::Mailbox& mb) {
  mb.interrupt_pending = false;
  return interrupted_status();
}

// A row handed to c by a writer for subscription k > 0 (c was registered as a waiter): the
// subscriptions listed before k may have rows too (one INSERT or group commit brings rows for
// several of them, offered one by one; or theirs came while c was being woken). c takes the
// first listed row there is now, trying each of them in order without waiting, and gives the
// handed row back as if it had never been handed out. Only c can do this: a writer holds its
// table's lock while it hands a row, and must not take another table's. The handed row is
// provisional until then (TakeRequest::provisional): not leased.
void take_first_listed(Consumer::Impl& c, const std::vector<Subscription>& subs, Consumer::Impl::Mailbox* result) {
  const Consumer::Impl::Mailbox handed = *result;
  QueueTable* handed_by = subs[static_cast<size_t>(handed.handed_sub)].table.get();
  for (int i = 0; i < handed.handed_sub; i++) {
    {
      auto mb = c.mailbox.lock();
      mb->handed = false;
      mb->waiting = true;
    }
    const Subscription& sub = subs[static_cast<size_t>(i)];
    const QueueTable::Take r = sub.table->take(c.request(i, sub.filter), false);
    {
      auto mb = c.mailbox.lock();
      mb->waiting = false;
      if (r != QueueTable::Take::kTaken) continue;
      *result = *mb;
    }
    handed_by->give_back(&c.holder, handed.handed_rowid, handed.handed_prior_deliveries);
    global_stats().wait_handoffs_passed_over.add();
    return;
  }
  // None: it keeps the handed row, whose lease starts now.
  handed_by->keep_handed(&c.holder, handed.handed_rowid, std::chrono::milliseconds(c.lease_ms));
}

// The start of every take (wait(), take_dead()): a KILL that came first wins and keeps the
// owned row; else the mailbox is cleared, the owned row ended, and (unless a KILL came
// meanwhile) the mailbox accepts a row. The caller resets `waiting` when it is done.
Status begin_take(Consumer& self, Consumer::Impl& c) {
  {
    auto mb = c.mailbox.lock();
    if (mb->interrupt_pending) return take_interrupt(*mb);  // KILL before the wait: keep the owned row
    *mb = Consumer::Impl::Mailbox();
  }
  if (self.owner_mode()) {
    // In a transaction (the binary log on, or BEGIN) the removal waits for its commit, but
    // the rows' group place and MAX_IN_FLIGHT slot are free for this take already: a loop of
    // waits on a limit of 1 would wait for the row it is ending.
    Status s = end_owned(c, true);
    if (!s.ok()) return s;
  }
  auto mb = c.mailbox.lock();
  if (mb->interrupt_pending) return take_interrupt(*mb);
  mb->waiting = true;
  return Status::Ok();
}

}  // namespace

Status Consumer::wait(const std::vector<Subscription>& subs, std::chrono::milliseconds timeout, int* index,
                      const WaitYield* yield) {
  Impl& c = *impl_;
  *index = 0;
  if (subs.empty()) return Status(ErrorCode::kInvalid, "queue_wait(): at least one table is required");
  for (const Subscription& s : subs)
    if (!s.table) return Status(ErrorCode::kInvalid, "queue_wait(): null table");
  global_stats().waits.add();
  struct LeaveWait {  // no hand-off once wait() returns
    Impl& c;
    ~LeaveWait() { c.mailbox.lock()->waiting = false; }
  } leave{c};
  if (Status s = begin_take(*this, c); !s.ok()) return s;

  const bool block = timeout.count() > 0;
  const auto deadline = deadline_after(timeout);
  std::vector<QueueTable*> registered;
  std::string dropped_message;
  Status failed;  // a table could not read the rows the take needed
  bool taken_in_order = false;  // by this scan, after every earlier subscription had no row
  // Each subscription in list order: takes a row, or registers as a waiter.
  auto take_or_register = [&] {
    for (size_t i = 0; i < subs.size(); i++) {
      QueueTable* t = subs[i].table.get();
      auto r = t->take(c.request(static_cast<int>(i), subs[i].filter), block);
      if (r == QueueTable::Take::kRegistered) {
        if (std::find(registered.begin(), registered.end(), t) == registered.end()) registered.push_back(t);
        continue;
      }
      if (r == QueueTable::Take::kDropped) {
        dropped_message = t->dropped_status().message();
        break;
      }
      if (r == QueueTable::Take::kFailed) {
        failed = t->take_failure();
        break;
      }
      taken_in_order = r == QueueTable::Take::kTaken;
      if (r != QueueTable::Take::kNone) break;  // taken now, or handed by an earlier table
    }
  };
  for (const Subscription& s : subs) s.table->counters().waits.add();
  take_or_register();

  Impl::Mailbox result;
  bool interrupted = false;
  std::optional<BlockingScope> sleeping;
  {
    auto mb = c.mailbox.lock();
    auto must_sleep = [&] {
      return block && dropped_message.empty() && failed.ok() && !mb->handed && !mb->dropped && !mb->interrupt_pending;
    };
    if (must_sleep()) {  // announced outside our lock: the server takes its own locks
      mb.unique_lock().unlock();
      sleeping.emplace(BlockingWait::kRow);
      mb.unique_lock().lock();
    }
    while (must_sleep()) {
      if (mb->rescan) {  // a closed table opened: the same pass again, from the first subscription
        mb->rescan = false;
        mb.unique_lock().unlock();
        for (QueueTable* t : registered) t->unregister(&c);
        registered.clear();
        take_or_register();
        mb.unique_lock().lock();
        continue;
      }
      // Spurious wake-ups loop; only the deadline itself is a timeout.
      const auto until = yield ? std::min(deadline, std::chrono::steady_clock::now() + yield->every) : deadline;
      if (c.wake.wait_until(mb.unique_lock(), until) != std::cv_status::timeout) continue;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      if (yield && now >= until) {
        mb.unique_lock().unlock();  // the check takes the server's locks
        const bool give_up = yield->should_yield();
        mb.unique_lock().lock();
        if (give_up) {  // a row handed meanwhile is still taken below
          global_stats().wait_yields.add();
          break;
        }
      }
    }
    mb->waiting = false;  // no hand-off after this point
    result = *mb;
    // A row or a drop wins over a KILL; the interrupt is consumed only when reported.
    interrupted = !result.handed && dropped_message.empty() && !result.dropped && result.interrupt_pending;
    if (interrupted) mb->interrupt_pending = false;
  }
  sleeping.reset();
  for (QueueTable* t : registered) t->unregister(&c);

  if (result.handed) {
    if (result.handed_sub > 0 && !taken_in_order) take_first_listed(c, subs, &result);
    enter_owner_mode(c, subs[static_cast<size_t>(result.handed_sub)].table, result);
    *index = result.handed_sub + 1;
    return Status::Ok();
  }
  if (!failed.ok()) return failed;
  if (!dropped_message.empty() || result.dropped) {
    return Status(ErrorCode::kDropped, !dropped_message.empty() ? dropped_message : result.dropped_message);
  }
  if (interrupted) return interrupted_status();
  global_stats().wait_timeouts.add();
  c.owns_nothing.store(true);  // as Q4M: owner mode all the same
  return Status::Ok();
}

Status Consumer::wait_batch(const Subscription& sub, size_t max_rows, std::chrono::milliseconds timeout,
                            size_t* taken, const WaitYield* yield) {
  Impl& c = *impl_;
  *taken = 0;
  if (max_rows == 0) return Status(ErrorCode::kInvalid, "queue_wait_batch(): max_rows must be at least 1");
  int index = 0;
  Status s = wait({sub}, timeout, &index, yield);
  if (!s.ok() || index == 0) return s;
  std::vector<std::pair<RowId, uint32_t>> rows{{c.owned_rowid.load(), c.owned_deliveries}};
  QueueTable* t = c.owned.get();
  while (rows.size() < max_rows) {
    {
      auto mb = c.mailbox.lock();
      mb->handed = false;
      mb->waiting = true;
    }
    // Never registers: only rows free now. Stops at kNone (no more), kConsumerDone (its
    // lease ran out meanwhile) and kDropped (the rows vanish with the table anyway).
    const QueueTable::Take r = t->take(c.request(0, sub.filter, true), false);
    auto mb = c.mailbox.lock();
    mb->waiting = false;
    if (r != QueueTable::Take::kTaken) break;
    rows.emplace_back(mb->handed_rowid, mb->handed_deliveries);
  }
  *taken = rows.size();
  if (rows.size() > 1) {
    std::sort(rows.begin(), rows.end());
    for (const auto& r : rows) {
      c.batch_ids.push_back(r.first);
      c.batch_deliveries.push_back(r.second);
    }
    c.owned_rowid.store(rows.front().first);
  }
  return Status::Ok();
}

Status Consumer::take_dead(const std::shared_ptr<QueueTable>& table, bool* taken) {
  Impl& c = *impl_;
  *taken = false;
  if (!table) return Status(ErrorCode::kInvalid, "queue_take_dead(): null table");
  if (Status s = begin_take(*this, c); !s.ok()) return s;
  QueueTable* t = table.get();
  const QueueTable::Take r = t->take_dead(c.request(0, nullptr));
  Impl::Mailbox result;
  {
    auto mb = c.mailbox.lock();
    mb->waiting = false;
    result = *mb;
  }
  if (r == QueueTable::Take::kDropped) return t->dropped_status();
  if (r == QueueTable::Take::kFailed) return t->take_failure();
  if (result.handed) {
    enter_owner_mode(c, table, result);
    *taken = true;
  }
  return Status::Ok();
}

}  // namespace q4m
