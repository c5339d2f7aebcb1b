// TokenBucket (GROUP_RATE, MAX_RATE) and parse_rate: the arithmetic, with made-up times.
#include "core/policy/token_bucket.h"
#include "check.h"

using namespace q4m;
using std::chrono::milliseconds;

namespace {
const SteadyClock::time_point t0 = SteadyClock::time_point() + std::chrono::hours(1);
}

TEST(a_new_bucket_is_full_and_each_hand_out_spends_a_token) {
  TokenBucket b;
  CHECK(!b.limited());
  CHECK(b.has(t0));
  b.set(10, 3, t0);
  CHECK(b.limited());
  CHECK_EQ(b.tokens(t0), 3u);
  for (int i = 0; i < 3; i++) b.spend(t0);
  CHECK_EQ(b.tokens(t0), 0u);
  CHECK(!b.has(t0));
  // 10 per second: the next token in 100 ms (rounded up, never early).
  const auto next = b.next(t0);
  CHECK(next >= t0 + milliseconds(100));
  CHECK(next <= t0 + milliseconds(101));
  CHECK(!b.has(t0 + milliseconds(99)));
  CHECK(b.has(next));
  CHECK_EQ(b.tokens(t0 + milliseconds(250)), 2u);
  CHECK_EQ(b.tokens(t0 + std::chrono::seconds(60)), 3u);  // never more than the burst
}

TEST(hand_outs_never_exceed_burst_plus_rate_times_elapsed) {
  TokenBucket b;
  b.set(7.5, 4, t0);
  uint64_t spent = 0;
  // A consumer that takes a token the moment one is there, for 10 s.
  auto now = t0;
  while (now < t0 + std::chrono::seconds(10)) {
    if (b.has(now)) {
      b.spend(now);
      spent++;
    } else {
      now = b.next(now);
    }
  }
  CHECK(spent <= 4 + 75);
  CHECK(spent >= 4 + 74);  // and the bucket gives what it promises
}

TEST(a_changed_bucket_keeps_its_tokens_up_to_the_new_burst) {
  TokenBucket b;
  b.set(1, 5, t0);
  b.spend(t0);
  b.spend(t0);
  CHECK_EQ(b.tokens(t0), 3u);
  b.set(2, 10, t0);  // ALTER: more per second, a bigger bucket, the same tokens now
  CHECK_EQ(b.tokens(t0), 3u);
  CHECK_EQ(b.tokens(t0 + milliseconds(1000)), 5u);
  b.set(2, 1, t0);  // a smaller bucket: cut down to it
  CHECK_EQ(b.tokens(t0), 1u);
  b.set(0, 1, t0);  // no limit
  CHECK(!b.limited());
  CHECK(b.has(t0));
  CHECK(b.full(t0));
}

TEST(a_fast_rate_holds_at_least_one_timer_pass_of_tokens) {
  TokenBucket b;
  b.set(10000, 1, t0);  // 100 per 10 ms pass: a bucket of 1 would cut it to 100 per second
  CHECK_EQ(b.tokens(t0), 100u);
}

TEST(a_full_bucket_is_refilled_now_and_an_empty_one_later) {
  TokenBucket b;
  b.set(4, 2, t0);
  CHECK(b.refilled(t0) == t0);
  b.spend(t0);
  b.spend(t0);
  CHECK(b.refilled(t0) >= t0 + milliseconds(500));
  CHECK(b.full(b.refilled(t0)));
}

TEST(rates_read_as_per_second_minute_or_hour) {
  double r = -1;
  std::string why;
  CHECK(parse_rate("20", &r, &why));
  CHECK_EQ(r, 20.0);
  CHECK(parse_rate(" 2.5 / s ", &r, &why));
  CHECK_EQ(r, 2.5);
  CHECK(parse_rate("120/min", &r, &why));
  CHECK_EQ(r, 2.0);
  CHECK(parse_rate("3600/Hour", &r, &why));
  CHECK_EQ(r, 1.0);
  for (const char* bad : {"", "0", "0/s", "0/min", "0.0", " 0 ", "fast", "-5", "1e3", "2..5", "10/fortnight", "0x10", "inf", "5/", "1/day"}) {
    why.clear();
    CHECK(!parse_rate(bad, &r, &why));
    CHECK(!why.empty());
  }
  CHECK(parse_rate("1/hour", &r, &why));
  CHECK(!parse_rate("20000000000", &r, &why));  // above 1e9 per second
  CHECK(!parse_rate("0.01/hour", &r, &why));    // less than one a day
}

TEST(when_n_tokens_are_there_is_now_later_or_never) {
  TokenBucket b;
  b.set(10, 3, t0);
  CHECK(b.when(3, t0) == t0);
  b.spend(t0);
  b.spend(t0);  // 1 left
  CHECK(b.when(1, t0) == t0);
  CHECK(b.when(2, t0) > t0);  // never now: a timer set for it must find a new token
  CHECK(b.when(2, t0) >= t0 + milliseconds(100));
  CHECK(b.when(4, t0) == SteadyClock::time_point::max());  // more than the bucket holds
}
