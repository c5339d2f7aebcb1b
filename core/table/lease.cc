#include "core/table/lease.h"

#include <algorithm>
#include <climits>

namespace q4m {

namespace {

int64_t to_ns(LeaseClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

LeaseClock::time_point from_ns(int64_t ns) { return LeaseClock::time_point(std::chrono::nanoseconds(ns)); }

bool later(const LeaseDeadline& a, const LeaseDeadline& b) { return a.at > b.at; }

}  // namespace

uint64_t next_lease_token() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

void LeaseHeap::push(const LeaseDeadline& d) {
  heap_.push_back(d);
  std::push_heap(heap_.begin(), heap_.end(), later);
}

LeaseDeadline LeaseHeap::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  LeaseDeadline d = heap_.back();
  heap_.pop_back();
  return d;
}

LeaseClock::time_point LeaseHeap::earliest() const {
  return heap_.empty() ? LeaseClock::time_point::max() : heap_.front().at;
}

void LeaseHeap::rebuild() { std::make_heap(heap_.begin(), heap_.end(), later); }

LeaseReaper& LeaseReaper::instance() {
  static LeaseReaper reaper;
  return reaper;
}

LeaseReaper::~LeaseReaper() { stop(); }

void LeaseReaper::start_locked(State& st) {
  if (st.thread.joinable()) return;
  st.stopping = false;
  next_scan_ns_.store(INT64_MIN);  // scan at once: deadlines may be due from before a stop()
  const uint64_t generation = ++st.generation;
  st.thread = std::thread([this, generation] { run(generation); });
}

void LeaseReaper::watch(std::weak_ptr<LeasedTable> t) {
  auto st = state_.lock();
  st->tables.push_back(std::move(t));
  start_locked(*st);
}

void LeaseReaper::deadline_added(LeaseClock::time_point at) {
  const int64_t ns = to_ns(at);
  if (ns >= next_scan_ns_.load()) return;  // the reaper wakes before it anyway
  auto st = state_.lock();
  if (ns < next_scan_ns_.load()) {
    next_scan_ns_.store(ns);
    start_locked(*st);
    wake_.notify_one();
  }
}

void LeaseReaper::stop() {
  std::thread t;
  {
    auto st = state_.lock();
    st->stopping = true;
    t.swap(st->thread);
    wake_.notify_one();
  }
  if (t.joinable()) t.join();
  next_scan_ns_.store(kNever);  // so that the next deadline_added() restarts the thread
}

void LeaseReaper::run(uint64_t generation) {
  for (;;) {
    std::vector<std::weak_ptr<LeasedTable>> tables;
    {
      auto st = state_.lock();
      for (;;) {
        if (st->stopping || st->generation != generation) return;  // stopped (and maybe restarted)
        const int64_t next = next_scan_ns_.load();
        if (next != kNever && next <= to_ns(LeaseClock::now())) break;
        if (next == kNever)
          wake_.wait(st.unique_lock());
        else
          wake_.wait_until(st.unique_lock(), from_ns(next));
      }
      // From here on a deadline added anywhere lowers next_scan_ns_ again, so one added to
      // a table after this scan passed it is not missed.
      next_scan_ns_.store(kNever);
      auto& all = st->tables;
      all.erase(std::remove_if(all.begin(), all.end(), [](const auto& w) { return w.expired(); }), all.end());
      tables = all;
    }
    const LeaseClock::time_point now = LeaseClock::now();
    LeaseClock::time_point earliest = LeaseClock::time_point::max();
    for (const auto& w : tables)
      if (auto t = w.lock()) earliest = std::min(earliest, t->expire_leases(now));
    tables.clear();
    if (earliest == LeaseClock::time_point::max()) continue;
    const int64_t at = to_ns(std::max(earliest, now + kGranularity));
    auto st = state_.lock();
    if (at < next_scan_ns_.load()) next_scan_ns_.store(at);
  }
}

}  // namespace q4m
