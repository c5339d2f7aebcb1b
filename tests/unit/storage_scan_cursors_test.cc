// ScanCursors: one cursor per live filter; a returned row moves cursors back; dead
// filters' cursors are dropped; and the sweep that drops them is amortized, so many
// live filters (a condition string that changes every second) do not make every wait
// pass over all of them.
#include <memory>
#include <new>
#include <vector>

#include "core/table/scan_cursors.h"
#include "check.h"
#include "prefix_filter.h"

using namespace q4m;
using namespace q4m_test;

namespace {

std::shared_ptr<const RowFilter> new_filter() { return std::make_shared<PrefixFilter>("x"); }

}  // namespace

TEST(a_filter_keeps_its_cursor_and_a_new_one_starts_at_zero) {
  ScanCursors cursors;
  auto f = new_filter(), g = new_filter();
  *cursors.cursor_for(f) = 42;
  CHECK_EQ(*cursors.cursor_for(f), 42u);
  CHECK_EQ(*cursors.cursor_for(g), 0u);
  CHECK_EQ(cursors.size(), 2u);
}

TEST(a_returned_row_moves_only_the_cursors_past_it_back) {
  ScanCursors cursors;
  auto f = new_filter(), g = new_filter();
  *cursors.cursor_for(f) = 10;
  *cursors.cursor_for(g) = 3;
  cursors.row_returned(5);
  CHECK_EQ(*cursors.cursor_for(f), 5u);
  CHECK_EQ(*cursors.cursor_for(g), 3u);
}

TEST(a_dead_filter_s_address_reused_starts_over) {
  // Both filters are built in the same storage, so the second one has the dead one's address.
  alignas(PrefixFilter) static unsigned char storage[sizeof(PrefixFilter)];
  auto in_storage = [] {
    return std::shared_ptr<const RowFilter>(new (storage) PrefixFilter("x"),
                                            [](const RowFilter* f) { f->~RowFilter(); });
  };
  ScanCursors cursors;
  auto f = in_storage();
  *cursors.cursor_for(f) = 7;
  f.reset();
  auto g = in_storage();
  REQUIRE(static_cast<const void*>(g.get()) == static_cast<const void*>(storage));
  CHECK_EQ(*cursors.cursor_for(g), 0u);
  CHECK_EQ(cursors.size(), 1u);
}

TEST(dead_filters_cursors_are_dropped) {
  ScanCursors cursors;
  for (int i = 0; i < 10000; ++i) *cursors.cursor_for(new_filter()) = 1;  // each dies at once
  CHECK(cursors.size() <= ScanCursors::kMinSweepSize + 1);
  auto f = new_filter();
  cursors.cursor_for(f);
  for (int i = 0; i < 5; ++i) cursors.cursor_for(new_filter());
  cursors.row_returned(0);  // also drops dead ones
  CHECK_EQ(cursors.size(), 1u);
}

TEST(many_live_filters_are_swept_a_logarithmic_number_of_times) {
  ScanCursors cursors;
  std::vector<std::shared_ptr<const RowFilter>> live;
  for (int i = 0; i < 4096; ++i) {
    live.push_back(new_filter());
    cursors.cursor_for(live.back());
  }
  const uint64_t after_adding = cursors.sweeps();
  // 64 -> 128 -> ... -> 4096: one sweep per doubling, not one per call.
  CHECK(after_adding <= 7);
  // Waits of filters already known never sweep.
  for (int round = 0; round < 3; ++round)
    for (auto& f : live) cursors.cursor_for(f);
  CHECK_EQ(cursors.sweeps(), after_adding);
  CHECK_EQ(cursors.size(), 4096u);
}

TEST(clear_forgets_every_cursor) {
  ScanCursors cursors;
  auto f = new_filter();
  *cursors.cursor_for(f) = 9;
  cursors.clear();
  CHECK_EQ(cursors.size(), 0u);
  CHECK_EQ(*cursors.cursor_for(f), 0u);
}
