// Spin-then-sleep for a group-commit follower. A follower's wait is short (a write, or
// one sync); sleeping on a futex costs a sleep, a wake-up by the leader and often a
// cross-CPU interrupt, which on a small or virtual machine costs more than the wait.
// So a follower first keeps its CPU for up to a budget, calling sched_yield() so any
// runnable thread goes first, and sleeps only if the leader has not answered by then.
// At most as many followers spin at once as this process may use CPUs: more spinners
// would only take CPU from the threads that produce the next batch.
#pragma once
#include <atomic>
#include <cstdint>

namespace q4m {

class SpinWait {
 public:
  // Waits until `word` no longer holds `busy` or `budget_us` have passed; returns true
  // if the value changed (no sleep needed). Returns false at once, without spinning,
  // when the budget is 0 or every spinning slot is taken.
  static bool spin_until_changed(const std::atomic<uint32_t>& word, uint32_t busy, uint32_t budget_us);

  // How many callers may spin at once: the CPUs in this process's affinity mask.
  static int max_spinners();
  // Callers spinning (or asking for a slot) right now.
  static int spinning_now();
};

}  // namespace q4m
