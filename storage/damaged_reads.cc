// A row whose bytes on disk fail their checksum (storage/row_check.h) is never handed out as it
// is, nor lost: the read fails with kDamaged and the row is set aside as a dead row, so takes
// skip it instead of handing it out again and again, while it stays in the table (scans meet
// it and fail on it; queue_take_dead() + queue_end() discards it). The table goes on: the
// damage may be one bad sector, or a passing read error (docs/recovery.md "Damaged rows").
#include "consumer_impl.h"
#include "queue_table_impl.h"

namespace q4m {

void QueueTableImpl::set_aside_damaged(TableState& st, RowId id, const Consumer* reader) {
  counters_.damaged_reads.add();
  global_stats().damaged_reads.add();
  RowEntry* e = st.index.find(id);
  if (!e) return;
  const bool readers = reader && e->owner == reader && e->state == RowState::kOwned;
  if (readers && reader->impl().took_dead) return;  // lent out as a dead row: its taker decides
  if (e->state != RowState::kFree && e->state != RowState::kDelayed && !readers) return;
  if (e->state == RowState::kDelayed) st.delay_tokens.erase(id);  // its deadline goes stale
  if (readers) reader->impl().rows_set_aside.store(true);  // its end() removes nothing
  e->owner = nullptr;
  set_state(st, *e, RowState::kDead);
  release_ready(st);  // a dead row holds up nothing in its message group
}

}  // namespace q4m
