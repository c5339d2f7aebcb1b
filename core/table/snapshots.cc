#include "core/table/snapshots.h"

#include <atomic>
#include <limits>
#include <set>

#include "core/util/guarded.h"

namespace q4m {

namespace {

std::atomic<uint64_t> g_tickets{0};
std::atomic<int> g_open{0};
std::atomic<uint64_t> g_newest{0};
Guarded<std::multiset<uint64_t>>& points() {
  static Guarded<std::multiset<uint64_t>> p;
  return p;
}

}  // namespace

uint64_t Snapshots::ticket() { return g_tickets.fetch_add(1, std::memory_order_seq_cst) + 1; }

uint64_t Snapshots::begin() {
  auto p = points().lock();
  // Open (and keeping every first insert) before the point is read: a commit whose ticket is
  // above the point then sees any() when it publishes, and journals what it changes.
  g_open.fetch_add(1, std::memory_order_seq_cst);
  g_newest.store(std::numeric_limits<uint64_t>::max(), std::memory_order_seq_cst);
  const uint64_t point = g_tickets.load(std::memory_order_seq_cst);
  p->insert(point);
  g_newest.store(point, std::memory_order_seq_cst);
  return point;
}

void Snapshots::end(uint64_t point) {
  auto p = points().lock();
  auto it = p->find(point);
  if (it == p->end()) return;
  p->erase(it);
  g_open.fetch_sub(1, std::memory_order_seq_cst);
}

bool Snapshots::any() { return g_open.load(std::memory_order_seq_cst) > 0; }

uint64_t Snapshots::newest() { return g_newest.load(std::memory_order_seq_cst); }

uint64_t Snapshots::oldest() {
  auto p = points().lock();
  return p->empty() ? std::numeric_limits<uint64_t>::max() : *p->begin();
}

}  // namespace q4m
