// Reaper: one thread per process that runs the tables' timed work (lease expiries, delays
// that run out, MESSAGE_TTL's expiry): it sleeps until the earliest deadline any table asked
// for, then lets each table do what is due (Timed::due).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/util/clock.h"
#include "core/util/guarded.h"

namespace q4m {

// A table as the reaper sees it.
class Timed {
 public:
  virtual ~Timed() = default;
  // Does what is due by `now`; returns when something is due next (time_point::max() if
  // nothing is pending).
  virtual SteadyClock::time_point due(SteadyClock::time_point now) = 0;
};

class Reaper {
 public:
  static Reaper& instance();
  ~Reaper();

  // The reaper calls t's due() from now on, for as long as t lives. Starts the thread on
  // first use.
  void watch(std::weak_ptr<Timed> t);
  // A deadline was added somewhere: wakes the reaper if it planned to sleep past it.
  void deadline_added(SteadyClock::time_point at);
  // Stops and joins the thread (plugin unload). The next deadline starts it again.
  void stop();

  // Scans are at least this far apart: with many leased rows ended in time, their stale
  // deadlines would otherwise wake the reaper once each.
  static constexpr std::chrono::milliseconds kGranularity{10};

 private:
  Reaper() = default;
  void run(uint64_t generation);

  struct State {
    std::vector<std::weak_ptr<Timed>> tables;
    std::thread thread;
    bool stopping = false;
    uint64_t generation = 0;  // of the running thread: one stopped and replaced exits
  };
  void start_locked(State& st);  // the thread, unless it runs

  Guarded<State> state_;
  std::condition_variable wake_;
  // When the reaper scans next (nanoseconds of SteadyClock; kNever = no deadline known).
  // Lowered under state_'s lock; read without it on the hot path.
  static constexpr int64_t kNever = INT64_MAX;
  std::atomic<int64_t> next_scan_ns_{kNever};
};

}  // namespace q4m
