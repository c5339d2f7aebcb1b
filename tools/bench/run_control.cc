#include "run_control.h"

#include <condition_variable>
#include <exception>
#include <thread>

namespace q4m::bench {

bool RunControl::should_stop() {
  if (stop_.load(std::memory_order_relaxed)) return true;
  if (Clock::now() > deadline_) {
    fail("run timed out after " + std::to_string(static_cast<int>(timeout_.count())) +
         " s (engine hang or far too slow)");
    return true;
  }
  return false;
}

void RunControl::fail(const std::string& why) {
  {
    auto e = first_error_.lock();
    if (e->empty()) *e = why;
  }
  stop_.store(true, std::memory_order_relaxed);
}

std::string RunControl::error() { return *first_error_.lock(); }

namespace {

// Holds every worker until all are ready, then releases them at once.
struct StartGate {
  int ready = 0;
  bool open = false;
};

}  // namespace

WorkersOutcome run_workers(int n, RunControl& ctl, const std::function<void(int, WorkerStats&)>& body) {
  std::vector<WorkerStats> stats(n);
  Guarded<StartGate> gate;
  std::condition_variable gate_cv;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      {
        auto g = gate.lock();
        ++g->ready;
        gate_cv.notify_all();
        gate_cv.wait(g.unique_lock(), [&] { return g->open; });
      }
      try {
        body(i, stats[i]);
      } catch (const std::exception& e) {
        ctl.fail("worker " + std::to_string(i) + ": " + e.what());
      }
    });
  }
  Clock::time_point start;
  {
    auto g = gate.lock();
    gate_cv.wait(g.unique_lock(), [&] { return g->ready == n; });
    start = Clock::now();
    ctl.start(start);
    g->open = true;
  }
  gate_cv.notify_all();
  for (auto& t : threads) t.join();

  WorkersOutcome out;
  Clock::time_point end = start;
  for (auto& s : stats) {
    if (s.last_progress > end) end = s.last_progress;
    out.merged.consume.merge(s.consume);
    out.merged.insert.merge(s.insert);
    out.merged.empty_polls += s.empty_polls;
  }
  out.seconds = std::chrono::duration<double>(end - start).count();
  return out;
}

}  // namespace q4m::bench
