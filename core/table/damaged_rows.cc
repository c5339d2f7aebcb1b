// A row whose bytes on disk fail their checksum (core/file/row_check.h) is never handed out
// as it is, nor lost: the read fails with kDamaged and the row is set aside as a dead row
// (Move::damaged: policy/dead_letters.h keeps it dead), so takes skip it instead of handing
// it out again and again, while it stays in the table (scans meet it and fail on it;
// queue_take_dead() + queue_end() discards it). The table goes on: the damage may be one bad
// sector, or a passing read error (docs/recovery.md "Damaged rows").
#include "core/table/table.h"

namespace q4m {

void Table::set_aside(State& st, RowId id, const Holder* reader, RowContext& ctx) {
  counters_.damaged_reads.add();
  global_stats().damaged_reads.add();
  RowEntry* e = st.index.find(id);
  if (!e) return;
  const DeadLetters& dead = st.policies.get<DeadLetters>();
  const bool readers = reader && held(e->state) && e->holder == reader;
  if (!queued(e->state) && !readers) return;  // someone else holds it: its holder's read reports it
  if (e->state == RowState::kDead && dead.damaged(id)) return;  // set aside already
  // Lent out as a dead row (queue_take_dead()): its taker decides, and its end() discards it.
  if (readers && dead.lent(*e)) return;
  if (readers && e->state == RowState::kOwned) reader->note_row_set_aside();  // its end() removes nothing
  Move m{RowState::kDead};
  m.damaged = true;
  move(st, *e, m, ctx);  // (a dead row already: the policies learn why it must stay dead)
}

void Table::set_aside(State& st, const std::vector<RowId>& ids) {
  if (ids.empty()) return;
  RowContext ctx = context(st);
  for (RowId id : ids) set_aside(st, id, nullptr, ctx);
  finish(st, ctx);  // a dead row holds up nothing in its message group
}

}  // namespace q4m
