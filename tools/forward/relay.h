// The relay loop: take a batch of rows on the source, make them durable at the destination,
// and only then let the next wait consume them. Survives either server or itself going away.
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

enum ExitCode { kExitDone = 0, kExitConfig = 1, kExitFatal = 2, kExitConflict = 3 };

class Relay {
 public:
  explicit Relay(const Options& opt);
  ExitCode run();

 private:
  void discover_columns();
  bool open_source();       // false on shutdown
  void open_destination();
  void deliver_pending();   // throws DbError
  void deliver_part(size_t first, size_t count);
  void refuse_rows_over_max_packet() const;  // throws DbError (kConfig)
  void verify_replays();    // throws DbError (kConflict) for a drop the source cannot explain
  size_t rows_to_take() const;
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

  size_t pending_ = 0;            // rows taken: src_.rows()[delivered_, pending_) are not yet durable at the destination
  size_t delivered_ = 0;
  bool pending_retried_ = false;  // an INSERT of them failed once: the destination may have it already
  size_t full_part_rows_ = 0;     // the destination was full (MAX_ROWS): parts of at most this many rows; 0 = no cap
  bool owns_row_ = false;         // the source connection owns rows (delivered or pending)
  bool any_accepted_ = false;     // the destination accepted a row from this process
  uint64_t max_accepted_ = 0;     // highest source row id it accepted from this process
  // The destination dropped rows as replays, saying its record for our source id is at this
  // row; checked against the source's ids before the source may consume them. 0 = none.
  uint64_t replay_record_to_verify_ = 0;
  uint64_t newest_replay_to_verify_ = 0;
  bool told_unverifiable_ = false;
  bool src_was_open_ = false, dst_was_open_ = false;
  std::chrono::steady_clock::time_point last_row_time_;
};

}  // namespace q4m::forward
