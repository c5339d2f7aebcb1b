// Leases (the visibility timeout of SQS, pgmq's vt): a row taken by a holder whose lease is
// set goes back to the queue if it is neither ended nor aborted in time, so that a consumer
// that hangs without disconnecting does not keep it forever. The rows of a batch share one
// lease. Ownership itself is RowEntry::holder; this policy keeps each holder's current
// delivery in the table: when it began, how many rows it holds, and its lease.
//
// A lease that runs out returns the rows (their delivery count goes into a RETURN record)
// and marks the delivery expired: the holder learns it from settle() or renew(), which
// fail with kLeaseExpired, and its rows were not removed. A settle() that comes first wins:
// from then on the lease can no longer run out under the removal.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/policy/policy.h"
#include "core/util/deadline_heap.h"

namespace q4m {

// A lease in an error message: "30 s", "0.25 s".
std::string seconds_text(int64_t ms);

class Leases : public PolicyBase {
 public:
  void moved(RowEntry& e, RowState from, const Holder* previous, const Move& m, RowContext& ctx);
  void removed(const RowEntry& before, RowContext&) {
    if (before.state == RowState::kOwned && before.holder) left(before.holder);
  }
  SteadyClock::time_point due(RowContext& ctx);  // rows whose lease ran out go back
  void forget() {
    deadlines_.clear();
    deliveries_.clear();
  }
  // A copying ALTER TABLE's take-over (core/table/takeover.cc): the holders whose rows are
  // owned here now, and those whose lease ran out in `from` who were not told yet, go on
  // with their delivery as it was there: when it began, its lease and that lease's deadline.
  void take_over(const Leases& from, RowContext& ctx);

  // The holder is about to remove its `count` rows (the lowest `first`): kLeaseExpired if
  // their lease ran out (then the holder is told only once), else the lease is cancelled.
  Status settle(const Holder* holder, RowId first, size_t count);
  // The holder's rows `ids` (still held, in `index`) are leased for `lease` from now.
  Status renew(const Holder* holder, const RowId* ids, size_t count, std::chrono::milliseconds lease, RowIndex& index,
               RowContext& ctx);
  // The holder let go of its rows (an abort): what it was told or not is over.
  void let_go(const Holder* holder);
  bool expired(const Holder* holder) const;  // a batch stops growing then
  // For QUEUE_OWNED_ROWS: when the holder's delivery began, and its lease's end (false if none).
  SteadyClock::time_point since(const Holder* holder) const;
  bool lease_end(const Holder* holder, SteadyClock::time_point* at) const;

 private:
  struct Delivery {
    SteadyClock::time_point since;
    uint32_t rows = 0;        // rows of the holder in kOwned
    uint64_t token = 0;       // of the live lease; 0 = none
    int64_t lease_ms = 0;     // what it was taken (or renewed) with, for messages
    SteadyClock::time_point at;  // the live lease's end
    bool expired = false;     // ran out; the holder has not been told
    uint64_t expired_token = 0;  // its token: the deadlines of the rest of its batch
  };
  void lease(Delivery& d, RowId id, int64_t ms, RowContext& ctx);  // a new lease
  void left(const Holder* holder);  // one of its rows is no longer owned
  void sweep(uint64_t held_rows);   // forgets idle deliveries once there are many
  // The row deadline `d` still applies to, or null (ended, aborted, removed, renewed).
  RowEntry* leased_row(RowIndex& index, const Deadline& d) const;
  Status expired_status(const Delivery& d, RowId first, size_t count) const;

  DeadlineHeap deadlines_;
  std::unordered_map<const Holder*, Delivery> deliveries_;
};

}  // namespace q4m
