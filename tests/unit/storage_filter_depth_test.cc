// How the cost of a conditional wait grows with queue depth. Each compiled filter has a
// cursor per table (rows before it are known not to match or not to be free), so
// consuming K matching rows from behind D non-matching ones evaluates about D + K rows
// in total, not K * D. The evaluation counts are exact and asserted; the times are
// printed for docs/conditions.md ("Cost over a deep queue") and never asserted.
#include <atomic>
#include <chrono>
#include <cstdio>

#include "core/row/filter.h"
#include "check.h"
#include "prefix_filter.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

void insert_many(QueueTable& t, size_t n, const std::string& payload) {
  std::vector<std::string_view> rows(n, payload);
  for (size_t done = 0; done < n; done += 10000) {
    std::vector<std::string_view> part(rows.begin() + done, rows.begin() + std::min(n, done + 10000));
    if (!t.insert(part, nullptr).ok()) return;
  }
}

struct Result {
  uint64_t evals = 0;
  double us_per_wait = 0;
  int consumed = 0;
};

// `depth` non-matching rows, then `k` matching ones; one consumer takes all k.
Result consume_behind(size_t depth, int k) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  Result r;
  if (!t) return r;
  insert_many(*t, depth, "skip");
  insert_many(*t, static_cast<size_t>(k), "want");
  auto f = std::make_shared<PrefixFilter>("want");
  Consumer c;
  int idx = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k; i++) {
    if (!c.wait({{t, f}}, milliseconds(0), &idx).ok() || idx != 1) break;
    r.consumed++;
  }
  c.end();
  r.us_per_wait = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / k;
  r.evals = f->evals.load();
  return r;
}

}  // namespace

TEST(consuming_behind_a_deep_non_matching_prefix_scans_it_once) {
  SyncModeScope sync(SyncMode::kNone);
  const int k = 200;
  for (size_t depth : {1000u, 10000u, 100000u}) {
    Result r = consume_behind(depth, k);
    CHECK_EQ(r.consumed, k);
    CHECK(r.evals <= depth + 2 * static_cast<uint64_t>(k));  // not k * depth
    std::printf("  depth %6zu: %d waits, %llu evaluations (%.2f per wait beyond the prefix), %.1f us/wait\n",
                depth, k, static_cast<unsigned long long>(r.evals),
                static_cast<double>(r.evals - depth) / k, r.us_per_wait);
  }
}

// Matching rows spread through the queue (1 in 10): each wait evaluates ~10 rows,
// whatever the depth.
TEST(interleaved_matches_cost_the_gap_not_the_depth) {
  SyncModeScope sync(SyncMode::kNone);
  for (size_t depth : {1000u, 100000u}) {
    TempDir dir;
    auto t = create_and_open(dir.file("t"));
    REQUIRE(t);
    for (size_t i = 0; i < depth / 10; i++) {
      insert_many(*t, 9, "skip");
      insert_many(*t, 1, "want");
    }
    auto f = std::make_shared<PrefixFilter>("want");
    Consumer c;
    int idx = 0;
    const int k = static_cast<int>(depth / 10);
    int consumed = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < k; i++) {
      if (!c.wait({{t, f}}, milliseconds(0), &idx).ok() || idx != 1) break;
      consumed++;
    }
    c.end();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / k;
    CHECK_EQ(consumed, k);
    CHECK(f->evals.load() <= depth + static_cast<uint64_t>(k));
    std::printf("  depth %6zu, 1 in 10 matches: %d waits, %.2f evaluations/wait, %.2f us/wait\n", depth, k,
                static_cast<double>(f->evals.load()) / k, us);
  }
}
