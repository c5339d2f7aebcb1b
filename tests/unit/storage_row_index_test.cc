// RowIndex lookups against a reference model: ids with gaps (as after recovery), removals
// at the front, in the middle and at the back, and the lazy compaction of removed entries.
#include <map>
#include <random>

#include "check.h"
#include "core/row/index.h"

using namespace q4m;

namespace {

// First live id >= from in the model, or 0.
RowId model_lower_bound(const std::map<RowId, bool>& live, RowId from) {
  auto it = live.lower_bound(from);
  return it == live.end() ? 0 : it->first;
}

// First entry at or after `pos` that is not removed, as a scan would see it.
RowId live_from(RowIndex& index, size_t pos) {
  for (; pos < index.end_pos(); pos++)
    if (index.at(pos).state != RowState::kRemoved) return index.at(pos).id;
  return 0;
}

void check_against_model(RowIndex& index, const std::map<RowId, bool>& live, RowId max_id) {
  for (RowId id = 0; id <= max_id + 2; id++) {
    CHECK_EQ(live_from(index, index.lower_bound(id)), model_lower_bound(live, id));
    RowEntry* e = index.find(id);
    CHECK_EQ(e != nullptr, live.count(id) == 1);
    if (e) CHECK_EQ(e->id, id);
  }
  // lower_bound is the first position whose id is >= from, removed entries included.
  for (size_t pos = 0; pos < index.end_pos(); pos++) {
    RowId id = index.at(pos).id;
    CHECK_EQ(index.lower_bound(id), pos);
    if (pos > 0 && index.at(pos - 1).id + 1 < id) CHECK_EQ(index.lower_bound(id - 1), pos);
  }
  CHECK_EQ(index.live(), static_cast<uint64_t>(live.size()));
}

}  // namespace

TEST(empty_index) {
  RowIndex index;
  CHECK_EQ(index.lower_bound(0), 0u);
  CHECK_EQ(index.lower_bound(7), 0u);
  CHECK(index.find(1) == nullptr);
}

TEST(contiguous_ids) {
  RowIndex index;
  std::map<RowId, bool> live;
  for (RowId id = 5; id < 5005; id++) {
    RowEntry e;
    e.id = id;
    index.append(e);
    live[id] = true;
  }
  check_against_model(index, live, 5005);
}

TEST(ids_with_gaps_and_removals) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; round++) {
    RowIndex index;
    std::map<RowId, bool> live;
    RowId id = 1 + rng() % 10;
    for (int i = 0; i < 3000; i++) {
      id += (rng() % 4 == 0) ? 1 + rng() % 50 : 1;  // gaps as recovery leaves them
      RowEntry e;
      e.id = id;
      e.length = 1;
      index.append(e);
      live[id] = true;
    }
    // Remove at the front (popped at once), in the middle (marked, compacted lazily) and
    // at the back, enough to trigger the compaction of removed entries.
    std::vector<RowId> ids;
    for (auto& kv : live) ids.push_back(kv.first);
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t to_remove = 1000 + rng() % 1500;
    if (round % 2) to_remove = ids.size() - 3;
    for (size_t i = 0; i < to_remove; i++) {
      CHECK(index.remove(ids[i]));
      live.erase(ids[i]);
      CHECK(!index.remove(ids[i]));
    }
    for (RowId front = live.empty() ? 0 : live.begin()->first; front && live.size() > 500;) {
      CHECK(index.remove(front));
      live.erase(front);
      front = live.begin()->first;
    }
    check_against_model(index, live, id);
  }
}
