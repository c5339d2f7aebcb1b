// Row ownership inside one table: consumers taking rows, waiters being handed rows,
// rows returning to the queue, delete claims.
#include "consumer_impl.h"
#include "queue_table_impl.h"

namespace q4m {

bool QueueTableImpl::matches(TableState& st, const RowEntry& e, const RowFilter& f, std::string* scratch) {
  // TODO(perf): read through an mmap of the file (settings().mmap_max) instead of pread.
  if (!st.file->read(e.offset, e.length, scratch).ok()) return false;  // unreadable: never matches
  global_stats().cond_evals.add();
  return f.matches(*scratch);
}

// Hands a Free row to the first waiter (FIFO) that still waits and whose filter matches.
void QueueTableImpl::offer_row(TableState& st, RowEntry& e, std::string_view payload) {
  if (st.waiters.empty() || e.state != RowState::kFree) return;
  std::string scratch;
  bool have_payload = payload.data() != nullptr || e.length == 0;
  for (auto it = st.waiters.begin(); it != st.waiters.end();) {
    if (it->filter) {
      if (!have_payload) {
        if (!st.file->read(e.offset, e.length, &scratch).ok()) return;
        payload = scratch;
        have_payload = true;
      }
      global_stats().cond_evals.add();
      if (!it->filter->matches(payload)) {
        ++it;
        continue;
      }
    }
    Consumer::Impl* c = it->consumer;
    if (!c->accept(it->sub_index, e.id)) {  // done waiting (timed out / got a row elsewhere)
      it = st.waiters.erase(it);
      continue;
    }
    e.state = RowState::kOwned;
    e.owner = c->self;
    owned_.fetch_add(1);
    st.waiters.erase(it);
    waiters_.store(st.waiters.size());
    counters_.handoffs.add();
    global_stats().wait_handoff.add();
    return;
  }
  waiters_.store(st.waiters.size());
}

void QueueTableImpl::row_became_free(TableState& st, RowEntry& e) {
  if (e.state != RowState::kFree) owned_.fetch_sub(1);
  e.state = RowState::kFree;
  e.owner = nullptr;
  // Scans skipped this row while it was taken: move their cursors back.
  if (st.first_free_hint > e.id) st.first_free_hint = e.id;
  for (auto it = st.cursors.begin(); it != st.cursors.end();) {
    if (it->second.filter.expired()) {
      it = st.cursors.erase(it);
      continue;
    }
    if (it->second.next > e.id) it->second.next = e.id;
    ++it;
  }
  offer_row(st, e, std::string_view());
}

QueueTableImpl::Take QueueTableImpl::take_or_register(Consumer::Impl& c, int sub_index,
                                                      const std::shared_ptr<const RowFilter>& filter,
                                                      bool register_waiter) {
  auto st = state_.lock();
  if (st->dropped) return Take::kDropped;
  // Where to start: rows before the cursor are known not to be Free-and-matching.
  RowId* cursor = &st->first_free_hint;
  if (filter) {
    ScanCursor& sc = st->cursors[filter.get()];
    if (sc.filter.owner_before(filter) || filter.owner_before(sc.filter) || sc.filter.expired()) {
      sc.filter = filter;  // new filter (or a dead one's address reused): start over
      sc.next = 0;
    }
    cursor = &sc.next;
  }
  std::string scratch;
  size_t pos = st->index.lower_bound(*cursor), end = st->index.end_pos();
  RowEntry* found = nullptr;
  for (; pos < end; pos++) {
    RowEntry& e = st->index.at(pos);
    if (e.state != RowState::kFree) continue;
    if (filter && !matches(*st, e, *filter, &scratch)) continue;
    found = &e;
    break;
  }
  // (Not next_rowid_: rows with smaller ids may be durable but not yet published.)
  if (found) *cursor = found->id;
  else if (end > 0) *cursor = st->index.at(end - 1).id + 1;
  if (st->cursors.size() > 64) {  // forget cursors of filters nobody holds any more
    for (auto it = st->cursors.begin(); it != st->cursors.end();)
      it = it->second.filter.expired() ? st->cursors.erase(it) : std::next(it);
  }
  if (found) {
    if (!c.accept(sub_index, found->id)) return Take::kConsumerDone;
    found->state = RowState::kOwned;
    found->owner = c.self;
    owned_.fetch_add(1);
    global_stats().wait_immediate.add();
    return Take::kTaken;
  }
  if (!register_waiter) return Take::kNone;
  {
    auto mb = c.mailbox.lock();
    if (!mb->waiting) return Take::kConsumerDone;
  }
  st->waiters.push_back(Waiter{&c, sub_index, filter});
  waiters_.store(st->waiters.size());
  return Take::kRegistered;
}

void QueueTableImpl::unregister(Consumer::Impl& c) {
  auto st = state_.lock();
  st->waiters.remove_if([&](const Waiter& w) { return w.consumer == &c; });
  waiters_.store(st->waiters.size());
}

void QueueTableImpl::abort_row(const Consumer* c, RowId id) {
  auto st = state_.lock();
  RowEntry* e = st->index.find(id);
  if (!e || e->owner != c || e->state != RowState::kOwned) return;  // vanished (truncate/drop)
  row_became_free(*st, *e);
}

bool QueueTableImpl::claim_for_delete(Consumer* viewer, RowId id) {
  const QueueTableImpl* owned_table = viewer ? viewer->impl().owned_table.load() : nullptr;
  if (owned_table && owned_table != this) return false;  // everything here is invisible to it
  {
    auto st = state_.lock();
    RowEntry* e = st->index.find(id);
    if (!e) return false;
    if (e->owner == viewer && e->state == RowState::kClaimedForDelete) return true;
    bool owned_by_viewer = viewer && e->state == RowState::kOwned && e->owner == viewer;
    if (owned_table && !owned_by_viewer) return false;  // in owner mode only the owned row is visible
    if (e->state != RowState::kFree && !owned_by_viewer) return false;
    if (e->state == RowState::kFree) owned_.fetch_add(1);
    e->state = RowState::kClaimedForDelete;
    e->owner = viewer;
    st->claims[viewer].push_back(id);
  }
  if (viewer) {
    auto tables = viewer->impl().claim_tables.lock();
    bool known = false;
    for (auto& w : *tables) known = known || w.lock().get() == this;
    if (!known) tables->push_back(weak_from_this());
  }
  return true;
}

void QueueTableImpl::release_claims(const Consumer* c) {
  auto st = state_.lock();
  auto it = st->claims.find(c);
  if (it == st->claims.end()) return;
  std::vector<RowId> ids = std::move(it->second);
  st->claims.erase(it);
  for (RowId id : ids) {
    RowEntry* e = st->index.find(id);
    if (e && e->state == RowState::kClaimedForDelete && e->owner == c) row_became_free(*st, *e);
  }
}

}  // namespace q4m
