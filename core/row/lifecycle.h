// The life of a row: its states and the moves between them. The table makes every move
// through one function (Table::move, core/table/rows.cc), which keeps the table's counts
// and tells every row policy (core/policy/policy.h); nothing else writes RowEntry::state.
//
//   state     in the queue?  held by      handed out by          visible to
//   kFree     yes            nobody       queue_wait (when every policy allows: takeable)
//   kDelayed  yes            nobody       nobody until its time   every connection
//   kDead     yes            nobody       queue_take_dead only    every connection
//   kOwned    no             a consumer   -                       its owner only
//   kClaimed  no             a DELETE or  -                       its claimer only
//                            the expiry
//   kRemoved  gone (a tombstone in the index until it is dropped)
//
//   from       to         when
//   (new)      kFree      an INSERT is published (Policies: may start it kDelayed or kDead)
//   (new)      kOwned     a copy of an owned row, held by no holder until the take-over
//                         (core/table/takeover.cc) gives it the state its original has
//   kFree      kOwned     queue_wait takes it, or a waiter is handed it
//   kDead      kOwned     queue_take_dead takes it
//   queued     kClaimed   a DELETE claims it; MESSAGE_TTL's expiry claims it
//   kOwned     kClaimed   its owner DELETEs it
//   kOwned     queued     it comes back: queue_abort, a disconnect, an expired lease
//                         (Placement: kFree, or kDelayed, kDead, kClaimed as policies say)
//   kClaimed   queued     the DELETE failed or its connection went away
//   kDelayed   queued     its time came
//   kDead      kFree      MAX_DELIVERIES was raised; kFree/kDelayed -> kDead: it was lowered
//   queued,    kDead      a read of it from disk failed its checksum (Move::damaged)
//   the reader's own
//   kOwned,    kRemoved   queue_end / the DELETE / the expiry commits the removal
//   kClaimed
//   any        kRemoved   TRUNCATE, DROP TABLE (every row at once)
#pragma once
#include <cstdint>

namespace q4m {

enum class RowState : uint8_t { kFree, kOwned, kClaimed, kRemoved, kDelayed, kDead };

// Held by a holder: counted in the table's owned rows and hidden from other connections.
inline bool held(RowState s) { return s == RowState::kOwned || s == RowState::kClaimed; }
// In the queue, held by no one: taken when free, or when its delay is over; a dead one only
// by queue_take_dead().
inline bool queued(RowState s) { return s == RowState::kFree || s == RowState::kDelayed || s == RowState::kDead; }

}  // namespace q4m
