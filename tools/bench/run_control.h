// Starting, stopping and timing the worker threads of one run.
// Connections are opened before run_workers(); the clock starts only when every
// thread is ready, and stops at the last worker's last useful operation (so
// idle readers timing out at the end do not count).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/util/guarded.h"
#include "latency.h"

namespace q4m::bench {

struct WorkerStats {
  Latencies consume;  // time to obtain one message (or run one SELECT 1)
  Latencies insert;
  uint64_t empty_polls = 0;        // polls / timed-out waits that found nothing
  uint64_t final_empty_polls = 0;  // ... of which the last one, after the run was over
  Clock::time_point last_progress{};  // end of the last operation that moved a message
};

// Shared by the workers of one run: the stop flag, the deadline, the first error.
class RunControl {
 public:
  explicit RunControl(double timeout_s) : timeout_(std::chrono::duration<double>(timeout_s)) {}

  // Called once by run_workers when the clock starts.
  void start(Clock::time_point t) { deadline_ = t + std::chrono::duration_cast<Clock::duration>(timeout_); }
  // True once any worker failed or the run exceeded its time limit.
  bool should_stop();
  // Records the first failure (later ones are dropped) and stops every worker.
  void fail(const std::string& why);
  std::string error();

 private:
  std::chrono::duration<double> timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  std::atomic<bool> stop_{false};
  Guarded<std::string> first_error_;
};

struct WorkersOutcome {
  double seconds = 0;  // start to the last progress of any worker
  WorkerStats merged;  // latencies merged over workers; empty_polls summed
};

// Runs body(worker_index, stats) on n threads. Exceptions thrown by a body stop
// the run through ctl.fail().
WorkersOutcome run_workers(int n, RunControl& ctl, const std::function<void(int, WorkerStats&)>& body);

}  // namespace q4m::bench
