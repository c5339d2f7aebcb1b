// MAX_IN_FLIGHT and MAX_RATE: limits for the whole table, for one resource every row's work
// shares (a third-party API): at most MAX_IN_FLIGHT rows out at once, and at most MAX_RATE
// hand-outs per second (a token bucket of MAX_BURST). While either is reached the table is
// closed: no take and no hand-off happens (open()); when a row comes back or is gone, or the
// next token arrives (the table's timer: due()), it opens again and the table serves its
// waiters (reopened()). No consumer polls.
//
// A row is out from its hand-out (queue_wait, a batch's rows, a waiter's hand-off) until it
// is gone or back in the queue: queue_end(), a DELETE, an abort, a disconnect, an expired
// lease. A row a transaction ended (queue_end() inside BEGIN) stays out until its COMMIT or
// ROLLBACK; one the next wait of its owner ends (in a transaction, or in autocommit with the
// binary log on: Move::frees_slot) is out no more, so that the wait may take a row. queue_take_dead() is an operator's tool: its rows are neither limited nor
// counted. Nothing of this is in the file: after a restart no row is out (the rows owned
// before it are queued again) and the bucket starts full.
#pragma once
#include <unordered_set>

#include "core/policy/policy.h"
#include "core/policy/token_bucket.h"

namespace q4m {

class TableLimits : public PolicyBase {
 public:
  void configure(const TableOptions& options, RowContext& ctx);
  void moved(RowEntry& e, RowState from, const Holder*, const Move& m, RowContext& ctx);
  void removed(const RowEntry& before, RowContext& ctx);
  // Whether the table may hand out a row now.
  bool open() const {
    if (!limited_) return true;
    return (max_in_flight_ == 0 || in_flight() < max_in_flight_) &&
           (!bucket_.limited() || bucket_.has(SteadyClock::now()));
  }
  // Whether it was closed and may be open again since the last call.
  bool reopened() {
    const bool r = reopened_;
    reopened_ = false;
    return r;
  }
  SteadyClock::time_point due(RowContext& ctx);  // the next token came
  void forget() {
    owned_ = 0;
    lent_.clear();
    claimed_.clear();
    reopened_ = true;
  }
  void report(TableStats& s) const;
  // A copying ALTER TABLE: the new table goes on with the old one's tokens.
  void take_over(const TableLimits& from, RowContext&) { bucket_ = from.bucket_; }

  uint64_t in_flight() const { return owned_ - lent_.size() + claimed_.size(); }

 private:
  // A row that was out is not any more: if that was the limit, the table opens.
  void left(RowContext& ctx);
  uint64_t max_in_flight_ = 0;
  bool limited_ = false;  // either limit is set
  TokenBucket bucket_;
  bool waiting_for_token_ = false;  // the timer passes by when the next token comes
  bool reopened_ = false;
  // Out: the rows in kOwned, but those queue_take_dead() lent out (lent_), and the rows a
  // transaction or DELETE of their owner claimed (claimed_).
  uint64_t owned_ = 0;
  std::unordered_set<RowId> lent_, claimed_;
};

}  // namespace q4m
