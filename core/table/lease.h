// Leases (the visibility timeout of SQS or pgmq): a row taken by a consumer whose lease is
// set goes back to the queue if it is neither ended nor aborted in time, so that a consumer
// that hangs without disconnecting does not keep it forever.
//
// Each table keeps the deadlines of the rows it leased in a LeaseHeap, under its own state
// lock. One LeaseReaper thread per process sleeps until the earliest deadline of all tables
// and then lets each table expire what is due (LeasedTable::expire_leases).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/util/guarded.h"

namespace q4m {

using LeaseClock = std::chrono::steady_clock;
using RowId = uint64_t;

// A fresh token for each lease (never 0, never reused): a deadline applies to the lease
// that made it, not to a later lease of the same row by the same connection.
uint64_t next_lease_token();

struct LeaseDeadline {
  LeaseClock::time_point at;
  RowId id = 0;
  uint64_t token = 0;
};

// Deadlines of one table's leased rows, earliest first. Entries of rows that were ended or
// aborted in time stay until they are due or until drop_stale(); not thread-safe.
class LeaseHeap {
 public:
  void push(const LeaseDeadline& d);
  bool due(LeaseClock::time_point now) const { return !heap_.empty() && heap_.front().at <= now; }
  LeaseDeadline pop();
  LeaseClock::time_point earliest() const;  // time_point::max() if empty
  size_t size() const { return heap_.size(); }
  void clear() { heap_.clear(); }
  // Keeps only the deadlines for which live(d) is true (O(size)).
  template <typename IsLive>
  void drop_stale(IsLive live);

 private:
  void rebuild();
  std::vector<LeaseDeadline> heap_;  // a min-heap on `at`
};

template <typename IsLive>
void LeaseHeap::drop_stale(IsLive live) {
  std::vector<LeaseDeadline> kept;
  kept.reserve(heap_.size());
  for (const LeaseDeadline& d : heap_)
    if (live(d)) kept.push_back(d);
  heap_.swap(kept);
  rebuild();
}

// A table as the reaper sees it.
class LeasedTable {
 public:
  virtual ~LeasedTable() = default;
  // Returns every row whose lease ran out by `now` to the queue, and every delayed row
  // that is due by then; returns the earliest deadline of either kind still pending
  // (time_point::max() if none).
  virtual LeaseClock::time_point expire_leases(LeaseClock::time_point now) = 0;
};

class LeaseReaper {
 public:
  static LeaseReaper& instance();
  ~LeaseReaper();

  // The reaper calls t's expire_leases() from now on, for as long as t lives. Starts the
  // thread on first use.
  void watch(std::weak_ptr<LeasedTable> t);
  // A deadline was added somewhere: wakes the reaper if it planned to sleep past it.
  void deadline_added(LeaseClock::time_point at);
  // Stops and joins the thread (plugin unload). The next deadline starts it again.
  void stop();

  // Scans are at least this far apart: with many leased rows ended in time, their stale
  // deadlines would otherwise wake the reaper once each.
  static constexpr std::chrono::milliseconds kGranularity{10};

 private:
  LeaseReaper() = default;
  void run(uint64_t generation);

  struct State {
    std::vector<std::weak_ptr<LeasedTable>> tables;
    std::thread thread;
    bool stopping = false;
    uint64_t generation = 0;  // of the running thread: one stopped and replaced exits
  };
  void start_locked(State& st);  // the thread, unless it runs

  Guarded<State> state_;
  std::condition_variable wake_;
  // When the reaper scans next (nanoseconds of LeaseClock; kNever = no deadline known).
  // Lowered under state_'s lock; read without it on the hot path.
  static constexpr int64_t kNever = INT64_MAX;
  std::atomic<int64_t> next_scan_ns_{kNever};
};

}  // namespace q4m
