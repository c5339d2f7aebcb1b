// Consumer: one per client connection; the owner-mode state machine. It holds rows of
// tables (holder()) and receives rows handed to it while it waits (consumer_impl.h).
// Used by its own connection thread, except interrupt() (any thread).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "core/table/queue_table.h"
#include "core/row/filter.h"

namespace q4m {

struct Subscription {
  std::shared_ptr<QueueTable> table;
  std::shared_ptr<const RowFilter> filter;  // null = any row
};

// Asked every `every` while a wait sleeps, on the waiting thread with no q4m lock held:
// true ends the wait as a timeout (no row), so that the caller's statement can end. The
// engine uses it for DDL that waits for the statement's metadata locks.
struct WaitYield {
  std::chrono::milliseconds every{250};
  std::function<bool()> should_yield;
};

class Transaction;

class Consumer {
 public:
  // connection_id: who this consumer is, as listed by QueueTable::owned_rows().
  explicit Consumer(uint64_t connection_id = 0);
  ~Consumer();  // returns the owned row (and rows claimed for delete) to their queues
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // queue_wait(): first removes the owned row (like end(); if its lease ran out, returns
  // kLeaseExpired at once, out of owner mode, without waiting), then takes ownership of the
  // first available row of the first subscription that has a matching one (list order is
  // priority), blocking up to `timeout`. A waiter woken by a row takes from the first listed
  // subscription that has a row when it wakes: a row handed to it for a later one goes back
  // untouched if an earlier one has a row too (one INSERT may bring rows for several).
  // *index = 1-based subscription index, 0 on timeout. A timeout leaves the consumer in
  // owner mode owning no row, as Q4M does: every table looks empty to it until end(), abort(),
  // release() or the next take.
  // Returns kInterrupted if interrupt() is pending or arrives during the wait, kDropped if a table
  // was dropped while waiting on it.
  // A wait that has to sleep announces it (BlockingWait::kRow, storage/blocking.h).
  // With `yield`, a sleeping wait also ends (as a timeout) once yield->should_yield() says so.
  Status wait(const std::vector<Subscription>& subs, std::chrono::milliseconds timeout, int* index,
              const WaitYield* yield = nullptr);

  // queue_wait_batch(): wait() on one subscription, then up to max_rows - 1 more rows of
  // that table that match and are free right now (it does not wait for them). The
  // connection owns them all: end() removes them in one durable commit, abort() and
  // release() return them, and one lease covers them (its expiry returns them all).
  // *taken = rows now owned (0 on timeout: owner mode owning no row, as after wait()).
  // max_rows must be >= 1.
  Status wait_batch(const Subscription& sub, size_t max_rows, std::chrono::milliseconds timeout, size_t* taken,
                    const WaitYield* yield = nullptr);

  // queue_take_dead(): like wait() with no wait, on the dead rows of `table` (see
  // QueueTable::set_max_deliveries): first removes the owned row, then takes the oldest dead
  // row, if any (*taken). The row is owned as any other: end() removes it, abort() returns
  // it to the dead rows, its lease applies.
  Status take_dead(const std::shared_ptr<QueueTable>& table, bool* taken);

  // queue_end(): remove the owned row durably, leave owner mode; kNotOwner outside owner mode
  // (in owner mode owning no row it just leaves it). If the
  // row's lease ran out first, it is not removed (it is back in the queue, perhaps already
  // with another consumer): kLeaseExpired, and owner mode is left all the same.
  // A copying ALTER TABLE moves the owned rows to the table it builds and keeps them owned
  // (QueueTable::take_over): end(), abort() and the lease follow them there. If it could not
  // keep them owned (the table left the engine), nothing is removed: kRowsMoved, owner mode
  // left (wait() and renew_lease() too).
  Status end();
  // queue_abort(): return the owned row, leave owner mode; kNotOwner outside owner mode (in
  // owner mode owning no row it just leaves it). A row whose
  // lease ran out is already back: Ok. With a delay > 0 the row stays queued (visible,
  // deletable) but is handed out again only once the delay has passed (in memory: a
  // restart returns it at once).
  Status abort(std::chrono::milliseconds delay = std::chrono::milliseconds(0));

  // Rows this consumer takes from now on are leased for `lease` (0 or less = no lease):
  // if it neither ends nor aborts one in time, the row goes back to the queue
  // (storage/lease.h). Its wait() or end() then reports kLeaseExpired.
  void set_lease(std::chrono::milliseconds lease);
  // Whether this consumer's removals (end(), the end inside wait(), remove_claimed()) wait
  // for a sync in a durable sync mode (default true). false (queue_sync_removals=OFF): the
  // removal is written, so a server crash keeps it, but not synced unless an insert's sync
  // covers it, so a machine crash may bring the row back (at-least-once); inserts are not
  // affected.
  void set_sync_removals(bool sync);
  bool sync_removals() const;
  // The transaction its removals join (end(), the end inside wait() and take_dead()): they
  // take effect at its commit (transaction.h); null (the default): each commits at once.
  void set_transaction(Transaction* txn);
  // queue_renew_lease(): the owned row's lease now runs out `lease` (> 0) from now, whether
  // or not it had one. kNotOwner if none; kLeaseExpired (and out of owner mode) if it ran
  // out already; kInvalid if lease <= 0.
  Status renew_lease(std::chrono::milliseconds lease);
  void release();  // connection closing: abort() if owning, and drop delete claims; never fails

  // KILL QUERY: a running wait() returns kInterrupted; if none is running, the next wait()
  // does so at once (a KILL landing between the engine's thd_killed() check and wait()
  // must not be lost). The wait that returns kInterrupted consumes the interrupt.
  void interrupt();
  // Forgets a pending interrupt. The engine calls it at the start of each statement's
  // queue_wait, before its own thd_killed() check, so a KILL meant for an earlier
  // statement does not abort a new one.
  void clear_interrupt();

  uint64_t connection_id() const;
  bool owner_mode() const;  // owning a row, or none after a wait timed out
  QueueTable* owned_table() const;  // null if not in owner mode
  RowId owned_rowid() const;        // 0 if not in owner mode; the lowest of a batch
  // How often the owned row has been handed out since its table was opened, this time
  // included (1 = first delivery); 0 if not in owner mode. In memory: a restart starts over.
  // For a batch: of its lowest row.
  uint32_t owned_delivery_count() const;
  // Rows owned: 0, 1, or the size of a batch (rows removed by a DELETE since included).
  size_t owned_count() const;
  // The delivery count of owned row `id`, 0 if this consumer does not own it.
  uint32_t delivery_count_of(RowId id) const;

  // What its rows are held as (RowEntry::holder), and what its scans may see (queue_table.h).
  const Holder& holder() const;
  View view() const;
  // Whether its scans (not in owner mode) also see the rows other connections hold (own or
  // claimed): a dump must keep the messages in flight. The engine sets it for a scan under
  // START TRANSACTION WITH CONSISTENT SNAPSHOT or LOCK TABLES ... READ (mariadb-dump's).
  void set_sees_held(bool sees);
  // A DELETE of this connection claimed rows in `table` (release() gives them back).
  void claimed_in(std::weak_ptr<QueueTable> table);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace q4m
