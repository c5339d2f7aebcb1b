// MESSAGE_TTL: queued rows older than their table's TTL are removed (SQS's retention period).
//
// Row ids follow insert order and so, clock steps aside, do insert times: the rows past
// their TTL are at the front of the index. The LeaseReaper's pass walks from the front and
// claims them (expirer_, like a DELETE's claim: held, so nobody takes them), then commits
// one REMOVE record for them without a sync of its own. A row that comes back to the queue
// after its TTL (an abort, a disconnect, an expired lease, a delay that ran out) is claimed
// on its way back instead of being handed out.
#include "queue_table_impl.h"

namespace q4m {

void QueueTableImpl::set_message_ttl(std::chrono::milliseconds ttl) {
  const uint64_t ms = ttl.count() > 0 ? static_cast<uint64_t>(ttl.count()) : 0;
  {
    auto st = state_.lock();
    if (st->ttl_ms == ms || st->dropped) return;
    st->ttl_ms = ms;
    if (ms == 0) return;  // rows claimed already are removed all the same
    const LeaseClock::time_point now = LeaseClock::now();
    const LeaseClock::time_point next = claim_expired(*st, now);
    if (next != LeaseClock::time_point::max()) watch_deadline(next);
  }
  remove_expired();
}

bool QueueTableImpl::claim_if_expired(TableState& st, RowEntry& e, uint64_t wall_ms) {
  if (st.ttl_ms == 0 || e.time_ms + st.ttl_ms > wall_ms) return false;
  claim_row(st, e, expirer_.get());
  return true;
}

LeaseClock::time_point QueueTableImpl::claim_expired(TableState& st, LeaseClock::time_point now) {
  st.ttl_watched = false;
  if (st.ttl_ms == 0) return LeaseClock::time_point::max();
  const uint64_t wall = now_ms();
  size_t claimed = 0;
  for (size_t pos = 0, end = st.index.end_pos(); pos < end; pos++) {
    RowEntry& e = st.index.at(pos);
    if (e.state == RowState::kRemoved) continue;
    if (e.time_ms + st.ttl_ms > wall) {  // this row and (nearly) all after it are younger
      st.ttl_watched = true;
      return now + std::chrono::milliseconds(e.time_ms + st.ttl_ms - wall);
    }
    // Held rows are left to their connection; they are claimed if they come back.
    if (!queued(e.state)) continue;
    claim_row(st, e, expirer_.get());
    if (++claimed == kMaxExpiredPerPass) {  // the rest in the next pass, so the lock is not held long
      st.ttl_watched = true;
      return now;
    }
  }
  return LeaseClock::time_point::max();
}

void QueueTableImpl::remove_expired() {
  // A moved table's rows are frozen (take_over): the table that took them over expires them;
  // a failed commit here would only claim them again, pass after pass.
  if (has_moved()) return;
  size_t removed = 0;
  // A failed commit puts the rows back (unclaim), where row_became_free() claims them again
  // and asks the reaper for another pass.
  if (!remove_claimed_rows(expirer_.get(), &removed).ok() || removed == 0) return;
  counters_.rows_expired.add(removed);
  global_stats().rows_expired.add(removed);
}

}  // namespace q4m
