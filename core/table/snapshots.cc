#include "core/table/snapshots.h"

#include <atomic>
#include <limits>
#include <set>

#include "core/util/guarded.h"

namespace q4m {

namespace {

std::atomic<uint64_t> g_tickets{0};
std::atomic<int> g_open{0};
Guarded<std::multiset<uint64_t>>& points() {
  static Guarded<std::multiset<uint64_t>> p;
  return p;
}

}  // namespace

uint64_t Snapshots::ticket() { return g_tickets.fetch_add(1, std::memory_order_relaxed) + 1; }

uint64_t Snapshots::begin() {
  auto p = points().lock();
  const uint64_t point = g_tickets.load(std::memory_order_relaxed);
  p->insert(point);
  g_open.fetch_add(1, std::memory_order_seq_cst);
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

uint64_t Snapshots::oldest() {
  auto p = points().lock();
  return p->empty() ? std::numeric_limits<uint64_t>::max() : *p->begin();
}

}  // namespace q4m
