// What rows with state cost in memory beyond a plain row (docs/limits.md, "Memory per row":
// the formula for a billion-row backlog): a message group, a grouped row, a DEDUP_COLUMN key.
// Measured as malloc's growth against the same rows in a plain table (the tail cache and the
// statements' buffers cancel out), with generous bounds: a change that doubles a cost fails.
#include <malloc.h>

#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

constexpr int kRows = 40000;

// malloc's bytes in use after `rows` (key, label) rows went into a new table that `setup` set up.
size_t held_by(const TempDir& dir, const std::string& name, const std::function<void(QueueTable&)>& setup,
               const std::function<std::string(int)>& key, uint64_t* index_bytes, uint64_t* rows = nullptr) {
  auto t = create_and_open(dir.file(name));
  if (!t) std::abort();
  setup(*t);
  const size_t before = mallinfo2().uordblks;
  std::vector<std::string> payloads;
  for (int i = 0; i < kRows; i++) payloads.push_back(key_label_row(key(i), "r" + std::to_string(i)));
  const size_t buffers = mallinfo2().uordblks - before;
  for (int i = 0; i < kRows; i += 1000) {
    std::vector<std::string_view> v(payloads.begin() + i, payloads.begin() + i + 1000);
    std::vector<RowId> ids;
    if (!t->insert(v, &ids).ok()) std::abort();
  }
  const size_t held = mallinfo2().uordblks - before - buffers;
  *index_bytes = t->info().memory_bytes;
  if (rows) *rows = t->info().rows;
  return held;
}

std::string key16(int i) {  // 16 bytes: past std::string's inline buffer, as most real keys
  char b[32];
  std::snprintf(b, sizeof b, "order-%010d", i);
  return b;
}

}  // namespace

TEST(a_group_a_grouped_row_and_a_dedup_key_cost_what_limits_md_says) {
  q4m_test::SyncModeScope sync(SyncMode::kNone);
  TempDir dir;
  auto none = [](QueueTable&) {};
  auto grouped = [](QueueTable& t) { set_option(t, &TableOptions::message_group, key_label_column("k")); };
  auto dedup = [](QueueTable& t) { set_dedup(t, key_label_column("k"), std::chrono::hours(1)); };
  uint64_t plain_index = 0, index = 0;
  const size_t plain = held_by(dir, "plain", none, key16, &plain_index);
  const double per_plain = double(plain) / kRows;
  // Every row its own group: a group each (and a grouped row each).
  const size_t groups = held_by(dir, "groups", grouped, key16, &index);
  const double per_group = (double(groups) - double(plain)) / kRows;
  const double group_index = double(index) / kRows;
  // 100 groups: a grouped row each.
  const size_t rows = held_by(dir, "rows", grouped, [](int i) { return key16(i % 100); }, &index);
  const double per_grouped_row = (double(rows) - double(plain)) / kRows;
  const double grouped_index = double(index) / kRows;
  uint64_t kept = 0;
  const size_t keys = held_by(dir, "dedup", dedup, key16, &index, &kept);
  const double per_key = (double(keys) - double(plain)) / kRows;
  std::printf("  plain row %.1f B (index %.2f B: the rows are at the tail, hot); beyond it: a group with its row "
              "%.0f B (index %.1f B), a grouped row of 100 groups %.0f B (index %.1f B), a 16-byte dedup key %.0f B\n",
              per_plain, double(plain_index) / kRows, per_group, group_index, per_grouped_row, grouped_index, per_key);
  CHECK_EQ(kept, uint64_t(kRows));
  CHECK(per_group < 1500);  // ~920 B measured (its row included)
  CHECK(per_grouped_row < 160);  // ~82 B
  CHECK(per_key < 300);  // ~180 B
}
