#include "core/policy/token_bucket.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace q4m {

namespace {

double seconds_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return to <= from ? 0.0 : std::chrono::duration<double>(to - from).count();
}

SteadyClock::time_point after(SteadyClock::time_point now, double seconds) {
  // Rounded up, so that the token is there when the timer comes.
  return now + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds)) +
         std::chrono::microseconds(1);
}

bool same_word(std::string_view a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; i++)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return i == a.size() && !b[i];
}

}  // namespace

void TokenBucket::set(double rate, uint32_t burst, SteadyClock::time_point now) {
  const bool was_limited = limited();
  const double level_now = was_limited ? level(now) : 0;
  rate_ = rate > 0 ? rate : 0;
  const double per_pass = rate_ * std::chrono::duration<double>(kTimerGranularity).count();
  capacity_ = std::max<double>(std::max<uint32_t>(burst, 1), std::ceil(per_pass));
  tokens_ = was_limited ? std::min(level_now, capacity_) : capacity_;
  last_ = now;
}

double TokenBucket::level(SteadyClock::time_point now) const {
  return std::min(capacity_, tokens_ + seconds_between(last_, now) * rate_);
}

uint64_t TokenBucket::tokens(SteadyClock::time_point now) const {
  if (!limited()) return UINT64_MAX;
  const double l = level(now);
  return l <= 0 ? 0 : static_cast<uint64_t>(std::floor(l + 1e-9));
}

void TokenBucket::spend(SteadyClock::time_point now) {
  if (!limited()) return;
  tokens_ = level(now) - 1;
  last_ = std::max(last_, now);
}

SteadyClock::time_point TokenBucket::next(SteadyClock::time_point now) const {
  if (!limited()) return now;
  const double l = level(now);
  return l >= 1 - 1e-9 ? now : after(now, (1 - l) / rate_);
}

SteadyClock::time_point TokenBucket::when(uint64_t n, SteadyClock::time_point now) const {
  if (!limited()) return now;
  if (static_cast<double>(n) > capacity_ + 1e-9) return SteadyClock::time_point::max();
  const double l = level(now);
  return l >= static_cast<double>(n) - 1e-9 ? now : after(now, (static_cast<double>(n) - l) / rate_);
}

SteadyClock::time_point TokenBucket::refilled(SteadyClock::time_point now) const {
  if (!limited()) return now;
  const double l = level(now);
  return l >= capacity_ ? now : after(now, (capacity_ - l) / rate_);
}

bool parse_rate(std::string_view text, double* per_second, std::string* why) {
  *per_second = 0;
  auto trim = [](std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
  };
  const std::string_view all = trim(text);
  const size_t slash = all.find('/');
  const std::string_view number = trim(all.substr(0, slash));
  const std::string_view unit = slash == std::string_view::npos ? std::string_view("s") : trim(all.substr(slash + 1));
  const std::string expected =
      "a number of hand-outs per second ('20', '2.5'), or per minute or hour ('100/min', '3600/hour')";
  // Digits with at most one point: no sign, exponent, hex or infinity.
  size_t digits = 0, points = 0;
  for (char ch : number) {
    if (std::isdigit(static_cast<unsigned char>(ch)))
      digits++;
    else if (ch == '.')
      points++;
    else
      digits = 0, points = 2;  // not a plain number
    if (points > 1) break;
  }
  if (number.empty() || digits == 0 || points > 1) {
    *why = "'" + std::string(text) + "' is not " + expected;
    return false;
  }
  double seconds = 0;
  if (same_word(unit, "s") || same_word(unit, "sec") || same_word(unit, "second"))
    seconds = 1;
  else if (same_word(unit, "m") || same_word(unit, "min") || same_word(unit, "minute"))
    seconds = 60;
  else if (same_word(unit, "h") || same_word(unit, "hour"))
    seconds = 3600;
  if (seconds == 0) {
    *why = "'" + std::string(text) + "' has an unknown unit '" + std::string(unit) + "': " + expected;
    return false;
  }
  const double value = std::strtod(std::string(number).c_str(), nullptr) / seconds;
  constexpr double kMax = 1e9;  // hand-outs per second: far above what a table hands out
  if (value > kMax) {
    *why = "'" + std::string(text) + "' is more than 1000000000 per second";
    return false;
  }
  if (value == 0) {  // it would read as no limit: DEFAULT says that
    *why = "'" + std::string(text) + "' is zero: a rate is more than zero (leave the option out or set it to DEFAULT for no limit)";
    return false;
  }
  if (value < 1.0 / (24 * 3600)) {
    *why = "'" + std::string(text) + "' is less than one per day";
    return false;
  }
  *per_second = value;
  return true;
}

}  // namespace q4m
