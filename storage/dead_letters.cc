// MAX_DELIVERIES: a row handed out that many times that comes back to the queue is dead (SQS's
// redrive to a dead-letter queue, kept inside the table so that the move is atomic): it stays
// visible and deletable, and only queue_take_dead() hands it out. Dying happens where every
// returning row passes (row_became_free, and abort_row for a delayed abort); the delivery
// count it follows from is in the file (RETURN records), so set_max_deliveries() at open
// finds the dead rows again after a restart.
#include "consumer_impl.h"
#include "queue_table_impl.h"

namespace q4m {

void QueueTableImpl::set_max_deliveries(uint32_t max) {
  auto st = state_.lock();
  if (st->max_deliveries == max || st->dropped) return;
  st->max_deliveries = max;
  // Sorts every queued row again (O(rows), at open and at an ALTER that changes the limit).
  for (size_t pos = 0, end = st->index.end_pos(); pos < end; pos++) {
    RowEntry& e = st->index.at(pos);
    if (e.state == RowState::kDead) {
      if (!st->dies(e)) row_became_free(*st, e);  // back in the queue, perhaps to a waiter
    } else if ((e.state == RowState::kFree || e.state == RowState::kDelayed) && st->dies(e)) {
      if (e.state == RowState::kDelayed) st->delay_tokens.erase(e.id);  // its deadline goes stale
      set_state(*st, e, RowState::kDead);
    }
  }
  // An owned row may have crossed the new limit either way (in line or lent out).
  if (st->message_group) st->groups.refresh_all(group_lookup(*st));
  release_ready(*st);  // rows behind a row that died may go now
}

QueueTableImpl::Take QueueTableImpl::take_dead(Consumer::Impl& c) {
  auto st = state_.lock();
  if (st->dropped) return Take::kDropped;
  if (st->dead_ids.empty() || st->moved_to) return Take::kNone;
  RowEntry* e = st->index.find(*st->dead_ids.begin());
  // (set_state keeps dead_ids exact; the check is a guard against ever handing out a held row)
  return e && e->state == RowState::kDead ? take_locked(*st, c, 0, *e) : Take::kNone;
}

}  // namespace q4m
