// MESSAGE_TTL: a queued row (free, delayed or dead; not held by a connection) inserted more
// than the TTL ago is removed and never handed out again (SQS's retention period). A row a
// connection holds is left to it; if it comes back to the queue after its TTL, it is
// removed then.
//
// Row ids follow insert order and so, clock steps aside, do insert times: the rows past
// their TTL are at the front of the index. The table's timer pass walks from the front and
// claims them for this policy's holder (like a DELETE's claim: held, so nobody takes them);
// the table then commits one REMOVE record for them without a sync of its own (after a
// crash that loses it, the rows are expired again).
//
// A server whose changes replicate (the engine's binary log) logs its expiries instead, so
// that a replica holds the rows its primary holds: the rows stay claimed, and the table asks
// the ExpiryLog to remove them in a logged transaction of its own (Transaction::remove_expired).
// A replica expires nothing itself (ExpiryLog::expires): its primary's log removes its rows.
#pragma once
#include <string>

#include "core/policy/policy.h"

namespace q4m {

// How this process's expiries leave their tables (none set: each table removes its own, as
// without replication). Called under table locks: answers without taking the server's.
class ExpiryLog {
 public:
  virtual ~ExpiryLog() = default;
  // Whether this server expires rows now (a replica does not).
  virtual bool expires() const = 0;
  // Whether claimed rows are left to the log's transaction (else the table removes them).
  virtual bool logged() const = 0;
  // The table at `path` holds rows claimed for expiry: a transaction of the log's removes them
  // soon (and again later if it fails: the rows come back claimed).
  virtual void claimed(const std::string& path) = 0;

  static ExpiryLog* get();
  static void set(ExpiryLog* log);  // null: none
};

class Expiry : public PolicyBase {
 public:
  Expiry() { remover_.set_sync_removals(false); }
  // The latest TTL wins; rows already too old are claimed before this returns.
  void configure(const TableOptions& options, RowContext& ctx);
  void added(RowEntry& e, std::string_view, RowContext& ctx);  // the timer passes by when it expires
  void published(RowContext&) {
    if (adding_) watched_ = true;
    adding_ = false;
  }
  // A row coming back to the queue past its TTL is claimed instead (one given back with a
  // delay is looked at when the delay ends).
  void placing(RowEntry& e, Placement& p, RowContext& ctx);
  SteadyClock::time_point due(RowContext& ctx);  // claims every queued row past its TTL
  const Holder* claimer() const { return &remover_; }
  void claims_removed(size_t n, TableCounters& counters);
  void forget() { watched_ = false; }

  static constexpr size_t kMaxPerPass = 100000;  // the rest in the next pass: the lock is not held long

 private:
  bool expired(const RowEntry& e, uint64_t wall_ms) const { return ttl_ms_ != 0 && e.time_ms + ttl_ms_ <= wall_ms; }
  Move claim() const;  // the move of an expired row to the remover (placing() and due())
  // A replica: rows are left to its primary's log; the timer comes back this often to see
  // whether it was promoted.
  static bool paused() {
    const ExpiryLog* log = ExpiryLog::get();
    return log && !log->expires();
  }
  static constexpr std::chrono::seconds kPausedPoll{1};
  uint64_t ttl_ms_ = 0;   // 0 = rows never expire
  bool watched_ = false;  // the timer knows when the oldest queued row expires
  bool adding_ = false;   // added() asked for a pass, for the commit being published
  Holder remover_;
};

}  // namespace q4m
