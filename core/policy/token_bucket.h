// TokenBucket: at most `rate` hand-outs per second, and `burst` at once after a pause. The
// bucket holds up to `burst` tokens, refilled continuously by time; a hand-out spends one.
// No lock and no clock of its own: the caller passes the steady time (GROUP_RATE per message
// group in group_order.h, MAX_RATE for a table in table_limits.h).
//
// Tokens come back continuously, but a consumer waiting for one is woken by the table's timer,
// whose passes are at least kTimerGranularity apart (core/table/reaper.h): a bucket holds at
// least what arrives in that time, so that a rate above 1 / granularity is not cut down to
// one token per pass.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/util/clock.h"

namespace q4m {

class TokenBucket {
 public:
  static constexpr std::chrono::milliseconds kTimerGranularity{10};  // Reaper::kGranularity

  // `rate` tokens per second (0: no limit), a bucket of `burst` (at least 1). A new bucket
  // is full; a changed one keeps the tokens it has, up to its new size.
  void set(double rate, uint32_t burst, SteadyClock::time_point now);
  bool limited() const { return rate_ > 0; }
  double rate() const { return rate_; }
  // Whole tokens there are at `now` (a large number if not limited).
  uint64_t tokens(SteadyClock::time_point now) const;
  bool has(SteadyClock::time_point now) const { return tokens(now) >= 1; }
  bool full(SteadyClock::time_point now) const { return !limited() || level(now) >= capacity_; }
  // A hand-out at `now` spends a token (one taken without a token is a debt: the next token
  // comes later).
  void spend(SteadyClock::time_point now);
  // When the next whole token is there (now if there is one).
  SteadyClock::time_point next(SteadyClock::time_point now) const;
  // When `n` whole tokens are there (time_point::max() if the bucket never holds that many).
  SteadyClock::time_point when(uint64_t n, SteadyClock::time_point now) const;
  // When the bucket is full again.
  SteadyClock::time_point refilled(SteadyClock::time_point now) const;

 private:
  double level(SteadyClock::time_point now) const;  // tokens at `now`, fractions included
  double rate_ = 0;          // tokens per second
  double capacity_ = 1;      // max(burst, rate * kTimerGranularity)
  double tokens_ = 0;        // at last_
  SteadyClock::time_point last_{};
};

// A rate as a table option gives it (GROUP_RATE, MAX_RATE): "R" or "R/unit", R a decimal
// number of hand-outs, unit s, sec, second, m, min, minute, h, hour (per second if none).
// *per_second = R per second. False, with *why, if it cannot be read or is zero (no limit is
// the option left out, not a zero rate).
bool parse_rate(std::string_view text, double* per_second, std::string* why);

}  // namespace q4m
