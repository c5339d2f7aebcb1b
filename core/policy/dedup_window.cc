#include "core/policy/dedup_window.h"

namespace q4m {

bool DedupWindow::contains(const std::string& key, uint64_t now_ms) {
  expire(now_ms);
  auto it = time_of_.find(key);
  return it != time_of_.end() && inside(it->second, now_ms);
}

void DedupWindow::remember(const std::string& key, uint64_t time_ms,
                           std::vector<std::pair<std::string, uint64_t>>* undo) {
  auto [it, added] = time_of_.emplace(key, time_ms);
  if (undo) undo->emplace_back(key, added ? 0 : it->second);
  if (!added && it->second >= time_ms) return;
  it->second = time_ms;
  by_time_.emplace_back(time_ms, key);
}

bool DedupWindow::admit(const std::string& key, uint64_t now_ms, std::vector<std::pair<std::string, uint64_t>>* undo) {
  expire(now_ms);
  auto [it, added] = time_of_.emplace(key, now_ms);
  if (!added && inside(it->second, now_ms)) return false;
  undo->emplace_back(key, added ? 0 : it->second);
  it->second = now_ms;
  by_time_.emplace_back(now_ms, key);
  return true;
}

void DedupWindow::forget_batch(std::vector<std::pair<std::string, uint64_t>>* undo, size_t from) {
  while (undo->size() > from) {  // newest first
    const auto& [key, earlier] = undo->back();
    if (earlier == 0)
      time_of_.erase(key);
    else
      time_of_[key] = earlier;
    undo->pop_back();
  }
  // by_time_ may keep entries for them: expire() checks each against time_of_.
}

void DedupWindow::forget(const std::string& key) { time_of_.erase(key); }  // by_time_'s entry goes when due

void DedupWindow::clear() {
  time_of_.clear();
  by_time_.clear();
}

void DedupWindow::for_each(uint64_t now_ms, const std::function<void(const std::string&, uint64_t)>& fn) {
  expire(now_ms);
  for (const auto& [key, time_ms] : time_of_)
    if (inside(time_ms, now_ms)) fn(key, time_ms);
}

void DedupWindow::expire(uint64_t now_ms) {
  while (!by_time_.empty() && !inside(by_time_.front().first, now_ms)) {
    auto it = time_of_.find(by_time_.front().second);
    if (it != time_of_.end() && it->second == by_time_.front().first) time_of_.erase(it);
    by_time_.pop_front();
  }
}

}  // namespace q4m
