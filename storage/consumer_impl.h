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

namespace q4m {

class QueueTableImpl;

struct Consumer::Impl {
  explicit Impl(Consumer* owner) : self(owner) {}

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
  Guarded<Mailbox> mailbox;
  std::condition_variable wake;

  // Owner mode. Written only by the consumer's own thread; atomics so a viewer
  // check from any thread is race-free.
  std::shared_ptr<QueueTableImpl> owned;
  std::atomic<QueueTableImpl*> owned_table{nullptr};
  std::atomic<RowId> owned_rowid{0};
  uint32_t owned_deliveries = 0;  // own thread only

  // Leases (storage/lease.h). lease_ms: what a row taken from now on is leased for (0 = no
  // lease); set by the own thread, read by a writer handing it a row.
  std::atomic<int64_t> lease_ms{0};
  // The owned row's lease, written under the owned table's state lock: at take or hand-off,
  // when the owner ends or aborts the row in time (token -> 0), and by expiry (expired set
  // first, then token -> 0, so a lock-free read of token == 0 also sees expired). Mutable:
  // the table reaches them through the row's const owner pointer.
  mutable std::atomic<uint64_t> lease_token{0};  // 0 = the owned row has no live lease
  mutable std::atomic<bool> lease_expired{false};
  mutable std::atomic<int64_t> owned_lease_ms{0};  // the lease the owned row was taken with

  // Tables in which this consumer holds delete claims (returned by release()).
  Guarded<std::vector<std::weak_ptr<QueueTableImpl>>> claim_tables;
};

}  // namespace q4m
