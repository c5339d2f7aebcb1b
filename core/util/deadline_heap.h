// DeadlineHeap: in-memory deadlines of one table, earliest first (lease expiries, retry and
// VISIBLE_AT delays). Each deadline carries the token of what set it, so a deadline whose
// cause was cancelled (a row ended in time, deleted, delayed again) is recognised as stale
// when it comes due, instead of being searched for and erased. Not thread-safe.
#pragma once
#include <cstdint>
#include <vector>

#include "core/util/clock.h"

namespace q4m {

// A fresh token (never 0, never reused in this process).
uint64_t next_token();

struct Deadline {
  SteadyClock::time_point at;
  uint64_t id = 0;     // what is due: a row id
  uint64_t token = 0;  // of the lease or delay that set it
};

class DeadlineHeap {
 public:
  void push(const Deadline& d);
  bool due(SteadyClock::time_point now) const { return !heap_.empty() && heap_.front().at <= now; }
  Deadline pop();
  SteadyClock::time_point earliest() const;  // time_point::max() if empty
  size_t size() const { return heap_.size(); }
  void clear() { heap_.clear(); }
  // fn(d) for every deadline, in no particular order.
  template <typename Fn>
  void for_each(Fn fn) const {
    for (const Deadline& d : heap_) fn(d);
  }
  // Keeps only the deadlines for which live(d) is true (O(size)).
  template <typename IsLive>
  void drop_stale(IsLive live) {
    std::vector<Deadline> kept;
    kept.reserve(heap_.size());
    for (const Deadline& d : heap_)
      if (live(d)) kept.push_back(d);
    heap_.swap(kept);
    rebuild();
  }

 private:
  void rebuild();
  std::vector<Deadline> heap_;  // a min-heap on `at`
};

}  // namespace q4m
