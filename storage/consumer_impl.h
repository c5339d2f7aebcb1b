// Consumer::Impl (internal header): a consumer's owner-mode state and the mailbox a
// writer uses to hand it a row while it waits.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <vector>

#include "consumer.h"
#include "guarded.h"
#include "lease.h"

namespace q4m {

class QueueTableImpl;

struct Consumer::Impl {
  Impl(Consumer* owner, uint64_t connection) : self(owner), connection_id(connection) {}

  struct Mailbox {
    bool waiting = false;   // accepting a row: hand-off allowed
    bool handed = false;    // a row was given (at most one per wait)
    int handed_sub = -1;
    RowId handed_rowid = 0;
    uint32_t handed_deliveries = 0;  // the row's delivery count, this one included
    bool dropped = false;
    std::string dropped_message;
    // Set by interrupt(), consumed by the wait() that returns kInterrupted, cleared by
    // clear_interrupt(). Survives between waits so a KILL that lands just before wait()
    // registers is not lost.
    bool interrupt_pending = false;
  };

  // Called by a table under its state lock (lock order table -> consumer).
  // Returns true if the consumer took the row.
  bool accept(int sub_index, RowId id, uint32_t deliveries);
  void table_dropped(const std::string& message);

  Consumer* const self;
  const uint64_t connection_id;
  Guarded<Mailbox> mailbox;
  std::condition_variable wake;

  // Owner mode. Written only by the consumer's own thread; atomics so a viewer
  // check from any thread is race-free.
  std::shared_ptr<QueueTableImpl> owned;
  std::atomic<QueueTableImpl*> owned_table{nullptr};
  std::atomic<RowId> owned_rowid{0};  // the lowest of a batch
  uint32_t owned_deliveries = 0;  // own thread only; a batch keeps its own (batch_deliveries)
  // A batch (queue_wait_batch) of two or more rows: their ids ascending and their delivery
  // counts; both empty otherwise. Own thread only.
  std::vector<RowId> batch_ids;
  std::vector<uint32_t> batch_deliveries;
  // Own thread only (read by the table on it): wait_batch() is adding rows to the owned one.
  bool taking_more = false;
  // Own thread only (read by the table on it): the owned row came from take_dead().
  bool took_dead = false;
  // Set by the table (under its state lock, on this consumer's own read) when an owned row's
  // bytes failed their checksum and the row was set aside (QueueTableImpl::set_aside_damaged):
  // end() then removes nothing and gives the other owned rows back.
  mutable std::atomic<bool> rows_set_aside{false};

  // Leases (storage/lease.h). lease_ms: what a row taken from now on is leased for (0 = no
  // lease); set by the own thread, read by a writer handing it a row.
  std::atomic<int64_t> lease_ms{0};
  bool sync_removals = true;  // own thread only (set_sync_removals)
  // The owned row's lease, written under the owned table's state lock: at take or hand-off,
  // when the owner ends or aborts the row in time (token -> 0), and by expiry (expired set
  // first, then token -> 0, so a lock-free read of token == 0 also sees expired). Mutable:
  // the table reaches them through the row's const owner pointer.
  mutable std::atomic<uint64_t> lease_token{0};  // 0 = the owned row has no live lease
  mutable std::atomic<bool> lease_expired{false};
  mutable std::atomic<int64_t> owned_lease_ms{0};  // the lease the owned row was taken with
  // The deadline of the live lease and the token of the lease that expired (0 = none): the
  // rows of a batch share one lease, and each row's deadline returns it once any has expired.
  mutable std::atomic<LeaseClock::rep> lease_at{0};
  mutable std::atomic<uint64_t> expired_token{0};
  // When the owned row (a batch: its first row) was handed out, in LeaseClock ticks;
  // written under the owned table's state lock (give_row), read by owned_rows().
  mutable std::atomic<LeaseClock::rep> owned_since{0};

  // Tables in which this consumer holds delete claims (returned by release()).
  Guarded<std::vector<std::weak_ptr<QueueTableImpl>>> claim_tables;
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
