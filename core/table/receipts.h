// Receipts (queue_receive): rows taken on behalf of no connection. Each row taken comes with
// a receipt, '<row id>:<token>', and any connection ends it, gives it back or extends its
// lease by that receipt (SQS's receipt handles, pgmq's read + delete). The rows are held by
// the queue's Receipts, one holder per row (a Consumer of no connection: connection id 0),
// each with a lease of its own, so the taking connection's next wait, end or disconnect
// leaves them alone: only their lease (required) or a call by receipt ends them.
//
// A receipt names one delivery: its token is the book's epoch (random, new whenever the
// table's queue is opened in a process: after a restart no receipt from before matches) and
// a counter of the takes, so a receipt of an earlier delivery of the same row never ends or
// extends a later one. Nothing here is persistent: after a restart or a crash the rows are
// back in the queue, as owned rows are.
//
// Every call on a list of receipts checks them all first: one that is malformed, unknown,
// stale (an earlier delivery) or whose row its lease gave back fails the call, and nothing
// is changed (a lease running out during the call is the one race left).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/table/consumer.h"
#include "core/table/queue_table.h"
#include "core/table/transaction.h"
#include "core/util/guarded.h"

namespace q4m {

class Receipts {
 public:
  // The receipts of `table`'s queue, made on first use. A copying ALTER TABLE's new table
  // has the old one's (its rows and their holders moved there).
  static std::shared_ptr<Receipts> of(const std::shared_ptr<QueueTable>& table);
  // Server shutdown, plugin unload: every receipt is forgotten, its row given back.
  static void forget_all();

  Receipts();  // (use of())
  ~Receipts();
  Receipts(const Receipts&) = delete;
  Receipts& operator=(const Receipts&) = delete;

  struct Received {
    RowId id = 0;
    uint32_t deliveries = 0;  // this one included
    std::string receipt;
  };
  // Takes up to `max_rows` rows of `sub` (waiting up to `timeout` for the first, as
  // Consumer::wait_batch; the others only if free now), each under a receipt of its own with
  // a lease of `lease` (> 0). *out: the rows taken, in id order (none on a timeout).
  Status receive(const Subscription& sub, size_t max_rows, std::chrono::milliseconds lease,
                 std::chrono::milliseconds timeout, const WaitYield* yield, std::vector<Received>* out);

  // The rows of `receipts` are removed by `txn` (at its commit, with its other changes; a
  // rollback gives them back to the queue, their delivery counts kept). *ended = how many.
  Status end(const std::vector<std::string>& receipts, Transaction& txn, size_t* ended);
  // Back to the queue (handed out again after `delay`), as queue_abort(delay).
  Status abort(const std::vector<std::string>& receipts, std::chrono::milliseconds delay, size_t* returned);
  // Their leases now run out `lease` (> 0) from now.
  Status renew(const std::vector<std::string>& receipts, std::chrono::milliseconds lease, size_t* renewed);

  // 'r1,r2,...' (blanks around each allowed) into receipts; kInvalid if one is empty, or
  // there are more than `max`.
  static Status split(std::string_view list, size_t max, std::vector<std::string>* out);

  size_t held();  // receipts whose row is still held by them (a test's figure; O(receipts))

 private:
  struct Entry {
    uint64_t take = 0;  // the counter part of its token
    int64_t lease_ms = 0;  // its lease as taken or last renewed, for messages
    std::shared_ptr<QueueTable> table;  // where it was taken
    std::unique_ptr<Consumer> holder;
  };
  using Book = std::unordered_map<RowId, Entry>;
  std::string receipt_of(RowId id, uint64_t take) const;
  // Every receipt found in `book` with its row held; else the error naming the first that is not.
  Status check(Book& book, const std::vector<std::string>& receipts, std::vector<Book::iterator>* found);
  void sweep(Book& book);  // forgets the receipts whose row is no longer theirs
  static bool holds(const Entry& e, RowId id);

  const uint64_t epoch_;
  struct State {
    Book book;
    uint64_t takes = 0;
    size_t sweep_at = 1024;
  };
  Guarded<State> state_;
  friend struct ReceiptsRegistry;
};

}  // namespace q4m
