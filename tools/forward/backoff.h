// Reconnect delays: 0.1 s doubling up to a ceiling, back to 0.1 s after a success.
#pragma once

#include <algorithm>

namespace q4m::forward {

class Backoff {
 public:
  explicit Backoff(double max_s) : max_s_(max_s) { reset(); }
  double next() {
    double d = next_s_;
    next_s_ = std::min(next_s_ * 2, max_s_);
    return d;
  }
  void reset() { next_s_ = std::min(kFirst, max_s_); }

 private:
  static constexpr double kFirst = 0.1;
  double max_s_;
  double next_s_ = kFirst;
};

}  // namespace q4m::forward
