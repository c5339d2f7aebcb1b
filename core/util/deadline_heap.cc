#include "core/util/deadline_heap.h"

#include <algorithm>
#include <atomic>

namespace q4m {

namespace {

bool later(const Deadline& a, const Deadline& b) { return a.at > b.at; }

}  // namespace

uint64_t next_token() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

void DeadlineHeap::push(const Deadline& d) {
  heap_.push_back(d);
  std::push_heap(heap_.begin(), heap_.end(), later);
}

Deadline DeadlineHeap::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Deadline d = heap_.back();
  heap_.pop_back();
  return d;
}

SteadyClock::time_point DeadlineHeap::earliest() const {
  return heap_.empty() ? SteadyClock::time_point::max() : heap_.front().at;
}

void DeadlineHeap::rebuild() { std::make_heap(heap_.begin(), heap_.end(), later); }

}  // namespace q4m
