#include "core/table/reaper.h"

#include <algorithm>
#include <climits>

namespace q4m {

namespace {

int64_t to_ns(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

SteadyClock::time_point from_ns(int64_t ns) { return SteadyClock::time_point(std::chrono::nanoseconds(ns)); }

}  // namespace

Reaper& Reaper::instance() {
  static Reaper reaper;
  return reaper;
}

Reaper::~Reaper() { stop(); }

void Reaper::start_locked(State& st) {
  if (st.thread.joinable()) return;
  st.stopping = false;
  next_scan_ns_.store(INT64_MIN);  // scan at once: deadlines may be due from before a stop()
  const uint64_t generation = ++st.generation;
  st.thread = std::thread([this, generation] { run(generation); });
}

void Reaper::watch(std::weak_ptr<Timed> t) {
  auto st = state_.lock();
  st->tables.push_back(std::move(t));
  start_locked(*st);
}

void Reaper::deadline_added(SteadyClock::time_point at) {
  const int64_t ns = to_ns(at);
  if (ns >= next_scan_ns_.load()) return;  // the reaper wakes before it anyway
  auto st = state_.lock();
  if (ns < next_scan_ns_.load()) {
    next_scan_ns_.store(ns);
    start_locked(*st);
    wake_.notify_one();
  }
}

void Reaper::stop() {
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

void Reaper::run(uint64_t generation) {
  for (;;) {
    std::vector<std::weak_ptr<Timed>> tables;
    {
      auto st = state_.lock();
      for (;;) {
        if (st->stopping || st->generation != generation) return;  // stopped (and maybe restarted)
        const int64_t next = next_scan_ns_.load();
        if (next != kNever && next <= to_ns(SteadyClock::now())) break;
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
    const SteadyClock::time_point now = SteadyClock::now();
    SteadyClock::time_point earliest = SteadyClock::time_point::max();
    for (const auto& w : tables)
      if (auto t = w.lock()) earliest = std::min(earliest, t->due(now));
    tables.clear();
    if (earliest == SteadyClock::time_point::max()) continue;
    const int64_t at = to_ns(std::max(earliest, now + kGranularity));
    auto st = state_.lock();
    if (at < next_scan_ns_.load()) next_scan_ns_.store(at);
  }
}

}  // namespace q4m
