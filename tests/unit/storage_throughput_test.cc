// Quick unit-level throughput measurement (prints rates; asserts only correctness).
// Q4M_BENCH_ROWS scales it up (default keeps the run to about a second).
#include <atomic>
#include <cstdlib>
#include <thread>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

int rows_for(SyncMode m) {
  const char* env = std::getenv("Q4M_BENCH_ROWS");
  int n = env ? std::atoi(env) : 0;
  if (n > 0) return m == SyncMode::kNone ? n : n / 10;
  return m == SyncMode::kNone ? 20000 : 1000;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Inserts `total` rows of 512 bytes from `threads` threads; returns rows/s.
double insert_rate(QueueTable& t, int threads, int total) {
  std::string row(512, 'm');
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ths;
  for (int i = 0; i < threads; i++)
    ths.emplace_back([&] {
      for (int k = 0; k < total / threads; k++) insert1(t, row);
    });
  for (auto& th : ths) th.join();
  return (total / threads) * threads / seconds_since(t0);
}

// Consumes everything with `threads` consumers (wait + implicit end); returns rows/s.
double consume_rate(std::shared_ptr<QueueTable> t, int threads, int total) {
  std::atomic<int> done{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ths;
  for (int i = 0; i < threads; i++)
    ths.emplace_back([&] {
      Consumer c;
      int idx;
      while (c.wait({{t, nullptr}}, std::chrono::milliseconds(0), &idx).ok() && idx) done++;
    });
  for (auto& th : ths) th.join();
  double rate = done.load() / seconds_since(t0);
  if (done.load() != total) std::fprintf(stderr, "  consumed %d of %d\n", done.load(), total);
  return rate;
}

void measure(SyncMode mode, const char* name) {
  SyncModeScope sync(mode);
  for (int threads : {1, 8, 64}) {  // 64: group-commit wake-ups dominate
    TempDir dir;
    auto t = create_and_open(dir.file("bench"));
    if (!t) return;
    int total = rows_for(mode);
    double ins = insert_rate(*t, threads, total);
    int have = static_cast<int>(t->info().rows);
    CHECK_EQ(have, (total / threads) * threads);
    double con = consume_rate(t, threads, have);
    CHECK_EQ(t->info().rows, 0u);
    std::fprintf(stderr, "  sync=%-9s threads=%d rows=%d: insert %8.0f rows/s, consume %8.0f rows/s\n", name,
                 threads, have, ins, con);
  }
}

}  // namespace

TEST(throughput_sync_none) { measure(SyncMode::kNone, "none"); }
TEST(throughput_fdatasync) { measure(SyncMode::kFdatasync, "fdatasync"); }
