// Guarded<T>: state that is reachable only while its mutex is held.
// Usage:  auto s = guarded.lock(); s->field = 1;   // unlocked when `s` dies
// A condition variable can wait on the accessor:  cv.wait(s.unique_lock());
#pragma once
#include <mutex>
#include <utility>

namespace q4m {

template <typename T>
class Guarded {
 public:
  class Access {
   public:
    explicit Access(Guarded& g) : lock_(g.mutex_), value_(&g.value_) {}
    T* operator->() { return value_; }
    T& operator*() { return *value_; }
    std::unique_lock<std::mutex>& unique_lock() { return lock_; }
   private:
    std::unique_lock<std::mutex> lock_;
    T* value_;
  };

  template <typename... Args>
  explicit Guarded(Args&&... args) : value_(std::forward<Args>(args)...) {}
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;

  Access lock() { return Access(*this); }

 private:
  std::mutex mutex_;
  T value_;
};

}  // namespace q4m
