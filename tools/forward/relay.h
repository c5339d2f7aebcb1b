// The relay loop: take a row on the source, make it durable at the destination, and only
// then let the next queue_wait() consume it. Survives either server or itself going away.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "backoff.h"
#include "destination.h"
#include "options.h"
#include "source.h"
#include "stats.h"

namespace q4m::forward {

enum ExitCode { kExitDone = 0, kExitConfig = 1, kExitFatal = 2 };

class Relay {
 public:
  explicit Relay(const Options& opt);
  ExitCode run();

 private:
  void discover_columns();
  bool open_source();       // false on shutdown
  void open_destination();
  void deliver_pending();   // throws DbError
  bool step();              // one round; false when the relay should stop (clean exit)
  bool should_stop();
  void finish_owned_row();  // queue_end() after the last delivered row; best effort

  // Run f; on error close that side (a closed source session gives its row back), rethrow.
  template <class F>
  auto on_source(F f) {
    try {
      return f();
    } catch (...) {
      src_.close();
      owns_row_ = false;
      throw;
    }
  }
  template <class F>
  auto on_destination(F f) {
    try {
      return f();
    } catch (...) {
      dst_.close();
      throw;
    }
  }

  const Options& opt_;
  Source src_;
  Destination dst_;
  Backoff backoff_;
  StatsReporter reporter_;
  RelayCounters counters_;
  std::vector<std::string> columns_;

  bool pending_ = false;          // a taken row not yet durable at the destination
  bool pending_retried_ = false;  // its INSERT failed once: the destination may have it already
  bool owns_row_ = false;         // the source connection owns a row (delivered or pending)
  bool any_accepted_ = false;     // the destination accepted a row from this process
  uint64_t max_accepted_ = 0;     // highest source row id it accepted from this process
  bool src_was_open_ = false, dst_was_open_ = false;
  std::chrono::steady_clock::time_point last_row_time_;
};

}  // namespace q4m::forward
