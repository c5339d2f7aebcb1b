// DEDUP_COLUMN: the keys of the rows inserted within the table's dedup window. A row whose
// key is among them is a duplicate: it is dropped instead of inserted (SQS's deduplication
// id, a "unique job"), whether the row it repeats is still queued or long consumed.
// No lock of its own: the table's writer state holds it, and only the group-commit leader
// checks and records keys, while it builds a batch, so two producers of one key cannot
// both get in.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace q4m {

class DedupWindow {
 public:
  void set_window_ms(uint64_t ms) { window_ms_ = ms; }
  // Whether a row with `key` was inserted less than the window before now_ms. Forgets keys
  // that are out of it on the way.
  bool contains(const std::string& key, uint64_t now_ms);
  // A row with `key` inserted at time_ms (the latest time of a key wins). With `undo`, what
  // forget_batch() needs to take it back.
  void remember(const std::string& key, uint64_t time_ms, std::vector<std::pair<std::string, uint64_t>>* undo = nullptr);
  // A new row with `key` at now_ms: false if the key is inside the window (a duplicate),
  // else remembers it as remember() does and returns true. One lookup for both.
  bool admit(const std::string& key, uint64_t now_ms, std::vector<std::pair<std::string, uint64_t>>* undo);
  // Takes back the remember() and admit() calls that filled `undo` from position `from` on
  // (their rows were not written), and drops those entries from it.
  void forget_batch(std::vector<std::pair<std::string, uint64_t>>* undo, size_t from = 0);
  void forget(const std::string& key);  // as if it had never been inserted
  void clear();
  size_t size() const { return time_of_.size(); }
  // Every key still inside the window at now_ms, with the time it was inserted.
  void for_each(uint64_t now_ms, const std::function<void(const std::string& key, uint64_t time_ms)>& fn);

 private:
  bool inside(uint64_t time_ms, uint64_t now_ms) const { return time_ms + window_ms_ > now_ms; }
  void expire(uint64_t now_ms);
  uint64_t window_ms_ = 0;
  std::unordered_map<std::string, uint64_t> time_of_;
  // (time, key) in remember() order, for expire(): times mostly increase (a copy's rows or
  // a clock step may come out of order; those entries then go a little late, which costs
  // memory, never a wrong answer: contains() checks the time).
  std::deque<std::pair<uint64_t, std::string>> by_time_;
};

}  // namespace q4m
