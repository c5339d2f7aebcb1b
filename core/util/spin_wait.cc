#include "core/util/spin_wait.h"

#include <sched.h>

#include <chrono>
#include <thread>

#include "core/util/stats.h"

namespace q4m {

namespace {

std::atomic<int> spinners{0};

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

// Holds one spinning slot for its lifetime, if one was free.
class SpinSlot {
 public:
  SpinSlot() : held_(spinners.fetch_add(1, std::memory_order_relaxed) < SpinWait::max_spinners()) {}
  ~SpinSlot() { spinners.fetch_sub(1, std::memory_order_relaxed); }
  bool held() const { return held_; }

 private:
  bool held_;
};

}  // namespace

int SpinWait::max_spinners() {
  static const int n = usable_cpus();
  return n;
}

int SpinWait::spinning_now() { return spinners.load(std::memory_order_relaxed); }

bool SpinWait::spin_until_changed(const std::atomic<uint32_t>& word, uint32_t busy, uint32_t budget_us) {
  if (budget_us == 0) return false;
  SpinSlot slot;
  if (!slot.held()) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(budget_us);
  while (word.load(std::memory_order_acquire) == busy) {
    if (std::chrono::steady_clock::now() >= deadline) {
      global_stats().commit_spin_timeouts.add();
      return false;
    }
    sched_yield();
  }
  global_stats().commit_spin_hits.add();
  return true;
}

}  // namespace q4m
