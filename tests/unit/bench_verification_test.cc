// q4m-bench's exactly-once verification, payload check, percentiles and work
// split: the parts that decide whether a benchmark run passes. They need no
// server; the .cc files are included because the unit-test rule links only the
// queue core.
#include "tools/bench/delivery_ledger.cc"
#include "tools/bench/latency.cc"
#include "tools/bench/payload.cc"
#include "tools/bench/work_split.h"
#include <thread>
#include <vector>

#include "check.h"

using namespace q4m::bench;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(ledger_accepts_each_id_once) {
  DeliveryLedger l(5);
  for (uint64_t id : {3, 0, 4, 1, 2}) l.record(id, true);
  Verification v = l.verify(0);
  CHECK(v.ok());
  CHECK_EQ(v.distinct, 5u);
  CHECK_EQ(v.min_id, 0u);
  CHECK_EQ(v.max_id, 4u);
}

TEST(ledger_rejects_duplicate_even_when_count_matches) {
  DeliveryLedger l(4);
  for (uint64_t id : {0, 1, 1, 3}) l.record(id, true);  // 4 deliveries, id 2 missing
  Verification v = l.verify(0);
  CHECK(!v.ok());
  CHECK_EQ(v.duplicates, 1u);
  CHECK(contains(v.describe(), "DUPLICATES 1"));
  CHECK(contains(v.describe(), "MISSING 1"));
}

TEST(ledger_rejects_missing_max) {
  DeliveryLedger l(3);
  l.record(0, true);
  l.record(1, true);
  Verification v = l.verify(0);
  CHECK(!v.ok());
  CHECK_EQ(v.max_id, 1u);
}

TEST(ledger_rejects_unknown_id_and_corrupt_payload) {
  DeliveryLedger l(2);
  l.record(0, true);
  l.record(7, true);
  CHECK(!l.verify(0).ok());
  DeliveryLedger l2(1);
  l2.record(0, false);
  CHECK(!l2.verify(0).ok());
  CHECK(contains(l2.verify(0).describe(), "CORRUPT PAYLOADS 1"));
}

TEST(ledger_rejects_rows_left_in_table) {
  DeliveryLedger l(1);
  l.record(0, true);
  Verification v = l.verify(2);
  CHECK(!v.ok());
  CHECK(contains(v.describe(), "ROWS LEFT IN TABLE 2"));
}

TEST(ledger_counts_concurrent_records) {
  DeliveryLedger l(40000);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (uint64_t id = t; id < 40000; id += 4) l.record(id, true);
    });
  for (auto& t : ts) t.join();
  CHECK(l.verify(0).ok());
}

TEST(payload_fixed_and_variable_lengths) {
  PayloadSpec fixed(100, false);
  CHECK_EQ(fixed.length_of(7), 100u);
  PayloadSpec var(100, true);
  bool saw_short = false, saw_long = false;
  for (uint64_t id = 0; id < 1000; ++id) {
    uint32_t n = var.length_of(id);
    CHECK(n < 100);
    saw_short |= n < 20;
    saw_long |= n > 80;
  }
  CHECK(saw_short && saw_long);
  CHECK_EQ(PayloadSpec(0, true).length_of(5), 0u);
}

TEST(payload_needs_no_escaping_and_detects_corruption) {
  PayloadSpec p(64, false);
  std::string s;
  p.append(12, &s);
  CHECK_EQ(s.size(), 64u);
  for (char c : s) CHECK(c >= 'a' && c <= 'z');
  CHECK(p.matches(12, s.data(), s.size()));
  CHECK(!p.matches(13, s.data(), s.size()));      // another message's payload
  CHECK(!p.matches(12, s.data(), s.size() - 1));  // truncated
  s[30] = 'A';
  CHECK(!p.matches(12, s.data(), s.size()));
}

TEST(latency_nearest_rank_percentiles) {
  Latencies l;
  Clock::time_point t0{};
  for (int us = 1; us <= 100; ++us) l.add(t0, t0 + std::chrono::microseconds(us));
  LatencySummary s = l.summarize();
  CHECK_EQ(s.count, 100u);
  CHECK_EQ(s.p50_us, 50.0);
  CHECK_EQ(s.p99_us, 99.0);
  CHECK_EQ(s.max_us, 100.0);
  CHECK_EQ(Latencies().summarize().count, 0u);
}

TEST(work_split_covers_range_exactly) {
  for (uint64_t total : {0ull, 1ull, 7ull, 100ull, 1001ull}) {
    for (int n : {1, 3, 4, 64}) {
      uint64_t next = 0;
      for (int i = 0; i < n; ++i) {
        CHECK_EQ(share_start(total, n, i), next);
        next += share(total, n, i);
      }
      CHECK_EQ(next, total);
    }
  }
}
