// Consumer::Impl (internal header): a consumer's owner-mode state and the mailbox a table
// uses to hand it a row while it waits (it is the table's Receiver).
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <vector>

#include "core/table/consumer.h"
#include "core/util/guarded.h"

namespace q4m {

struct Consumer::Impl final : public Receiver {
  explicit Impl(uint64_t connection) : holder(connection) {}

  struct Mailbox {
    bool waiting = false;   // accepting a row: hand-off allowed
    bool handed = false;    // a row was given (at most one per wait)
    int handed_sub = -1;
    RowId handed_rowid = 0;
    uint32_t handed_deliveries = 0;  // the row's delivery count, this one included
    uint32_t handed_prior_deliveries = 0;  // its count before: restored if it is given back
    bool dropped = false;
    std::string dropped_message;
    // Set by interrupt(), consumed by the wait() that returns kInterrupted, cleared by
    // clear_interrupt(). Survives between waits so a KILL that lands just before wait()
    // registers is not lost.
    bool interrupt_pending = false;
    // A table asked it to take again (Receiver::rescan): its wait does so, then sleeps on.
    bool rescan = false;
  };

  // Receiver: called by a table under its state lock (lock order table -> consumer).
  bool accept(int sub, RowId id, uint32_t deliveries, uint32_t prior_deliveries) override;
  bool waiting() override { return mailbox.lock()->waiting; }
  void rescan() override;
  void table_dropped(const std::string& message) override;

  // What a take by this consumer asks of a table.
  TakeRequest request(int sub, const std::shared_ptr<const RowFilter>& filter, bool more = false) {
    TakeRequest r;
    r.receiver = this;
    r.holder = &holder;
    r.sub = sub;
    r.filter = filter;
    r.lease_ms = lease_ms;
    r.more = more;
    r.provisional = sub > 0;  // a later subscription's hand-off: kept only if no earlier one has a row
    return r;
  }

  Holder holder;
  Guarded<Mailbox> mailbox;
  std::condition_variable wake;

  // Owner mode. Written only by the consumer's own thread; atomics so a viewer check from
  // any thread is race-free. The table holds the truth (RowEntry::holder); these say which
  // rows to end, abort or show.
  std::shared_ptr<QueueTable> owned;
  std::atomic<QueueTable*> owned_table{nullptr};
  std::atomic<RowId> owned_rowid{0};  // the lowest of a batch
  // Owner mode owning no row: the wait that entered it returned 0 (as Q4M's queue_wait()).
  // Every table looks empty to it (View::owns_nothing); end() and abort() just leave it.
  std::atomic<bool> owns_nothing{false};
  bool sees_held = false;  // its own thread only
  uint32_t owned_deliveries = 0;  // own thread only; a batch keeps its own (batch_deliveries)
  // A batch (queue_wait_batch) of two or more rows: their ids ascending and their delivery
  // counts; both empty otherwise. Own thread only.
  std::vector<RowId> batch_ids;
  std::vector<uint32_t> batch_deliveries;

  int64_t lease_ms = 0;  // what a row taken from now on is leased for (0 = no lease); own thread
  Transaction* txn = nullptr;  // set_transaction(); own thread
  // The owned rows were taken with a lease, or renewed to one: end() settles it first.
  bool leased = false;

  // Tables in which this consumer holds delete claims (returned by release()).
  Guarded<std::vector<std::weak_ptr<QueueTable>>> claim_tables;
};

// Every row a consumer owns: its batch, or its one row. Valid while the consumer's batch is
// unchanged; allocates nothing (the single-row path is the hot one).
class OwnedIds {
 public:
  explicit OwnedIds(const Consumer::Impl& c)
      : one_(c.owned_rowid.load()), many_(c.batch_ids.empty() ? nullptr : &c.batch_ids) {}
  const RowId* begin() const { return many_ ? many_->data() : &one_; }
  const RowId* end() const { return begin() + size(); }
  size_t size() const { return many_ ? many_->size() : 1; }
  RowId front() const { return *begin(); }

 private:
  RowId one_;
  const std::vector<RowId>* many_;
};

}  // namespace q4m
