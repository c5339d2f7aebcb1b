// VISIBLE_AT_COLUMN: a row whose TIMESTAMP column holds a future time is queued but not
// handed out before it; the time is in the row, so it holds across a reopen.
#include <chrono>
#include <thread>

#include "core/row/visible_at.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// Rows of (v INT NOT NULL, at TIMESTAMP(n) NULL): one null-flag byte, `at`'s flag is bit 1.
std::shared_ptr<const VisibleAtColumn> schema_with_timestamp(uint32_t decimals = 3) {
  auto c = std::make_shared<VisibleAtColumn>();
  c->schema.table_name = "test.jobs";
  c->schema.null_bytes = 1;
  ColumnInfo v{"v", ColumnKind::kInt, 4, false, 0, 0, 0};
  ColumnInfo at{"at", ColumnKind::kTimestamp, 4 + (decimals + 1) / 2, false, decimals, 0, 2};
  c->schema.columns = {v, at};
  c->column = 1;
  return c;
}

// TIMESTAMP(n) bytes for `ms` since 1970 (n = 0, 2 or 3: seconds, then 10 ms or 100 us units).
std::string timestamp_bytes(int64_t ms, uint32_t decimals) {
  const uint32_t s = static_cast<uint32_t>(ms / 1000);
  std::string b{static_cast<char>(s >> 24), static_cast<char>(s >> 16), static_cast<char>(s >> 8),
                static_cast<char>(s)};
  if (decimals == 1 || decimals == 2) b.push_back(static_cast<char>(ms % 1000 / 10));
  if (decimals == 3 || decimals == 4) {
    const uint32_t f = static_cast<uint32_t>(ms % 1000 * 10);
    b += {static_cast<char>(f >> 8), static_cast<char>(f)};
  }
  return b;
}

// The payload of (v, at); at_ms < 0 means NULL.
std::string row(int32_t v, int64_t at_ms, uint32_t decimals = 3) {
  std::string out;
  RowPayloadWriter w(&out);
  w.begin(std::string(1, at_ms < 0 ? '\x02' : '\x00'));
  w.add(std::string{static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                    static_cast<char>(v >> 24)});
  if (at_ms >= 0) w.add(timestamp_bytes(at_ms, decimals));
  return out;
}

std::string payload_of(QueueTable& t, RowId id) {
  std::string p;
  bool found = false;
  return t.read_row(id, &p, &found).ok() && found ? p : std::string();
}

}  // namespace

TEST(the_column_decodes_to_milliseconds_rounded_up) {
  auto c = schema_with_timestamp(3);
  CHECK_EQ(visible_at_ms(*c, row(1, 1700000000123)), 1700000000123);
  CHECK_EQ(visible_at_ms(*c, row(1, -1)), 0);  // NULL: at once
  CHECK_EQ(visible_at_ms(*c, "garbage"), 0);
  auto c0 = schema_with_timestamp(0);
  CHECK_EQ(visible_at_ms(*c0, row(1, 1700000000999, 0)), 1700000000000);
  auto c2 = schema_with_timestamp(2);
  CHECK_EQ(visible_at_ms(*c2, row(1, 1700000000120, 2)), 1700000000120);
  // 6 digits: 3 bytes of microseconds, rounded up to the next millisecond.
  auto c6 = schema_with_timestamp(6);
  std::string b = timestamp_bytes(1700000000000, 0) + std::string{'\x00', '\x03', '\xe9'};  // 1001 us
  std::string p;
  RowPayloadWriter w(&p);
  w.begin(std::string(1, '\x00'));
  w.add(std::string(4, '\x00'));
  w.add(b);
  CHECK_EQ(visible_at_ms(*c6, p), 1700000000002);
}

TEST(a_row_due_later_is_queued_but_not_handed_out_before_its_time) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_option(*t, &TableOptions::visible_at, schema_with_timestamp());
  const int64_t now = wall_ms();
  RowId later, past, null_time;
  REQUIRE(insert1(*t, row(1, now + 400), &later).ok());
  REQUIRE(insert1(*t, row(2, now - 1000), &past).ok());
  REQUIRE(insert1(*t, row(3, -1), &null_time).ok());
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK_EQ(t->visible_count(nullptr), 3u);
  Consumer a, b;
  REQUIRE(take(a, t));
  CHECK_EQ(a.owned_rowid(), past);
  REQUIRE(a.end().ok());
  REQUIRE(take(a, t));
  CHECK_EQ(a.owned_rowid(), null_time);
  REQUIRE(a.end().ok());
  CHECK(!take(b, t));
  REQUIRE(take(b, t, milliseconds(10000)));  // handed to the waiter when due
  CHECK(wall_ms() >= now + 400);
  CHECK_EQ(b.owned_rowid(), later);
  CHECK_EQ(b.owned_delivery_count(), 1u);
  CHECK(b.end().ok());
  CHECK_EQ(t->info().delayed_rows, 0u);
}

TEST(the_delay_holds_across_a_reopen_and_a_compaction) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  set_option(*t, &TableOptions::visible_at, schema_with_timestamp());
  RowId gone, later;
  REQUIRE(insert1(*t, row(1, -1), &gone).ok());
  const std::string later_row = row(2, wall_ms() + 600000);  // due in 10 minutes
  REQUIRE(insert1(*t, later_row, &later).ok());
  {
    Consumer a;
    REQUIRE(take(a, t));
    REQUIRE(a.end().ok());
  }
  t.reset();
  // After a crash (no index snapshot; nothing was given back with a delay) the file alone
  // does not say the row is delayed:
  write_file_bytes(dir.file("copy"), read_file_bytes(path));
  {
    std::shared_ptr<QueueTable> crashed;
    REQUIRE(TableRegistry::instance().acquire(dir.file("copy"), &crashed).ok());
    Consumer c;
    CHECK(take(c, crashed));  // before the column is known, the row is just a row...
    REQUIRE(c.abort().ok());
    set_option(*crashed, &TableOptions::visible_at, schema_with_timestamp());  // ...the engine names it when it opens the table
    CHECK_EQ(crashed->info().delayed_rows, 1u);
    CHECK(!take(c, crashed));
  }
  t = reopen(path);  // a clean close: the index snapshot keeps retry delays only...
  REQUIRE(t);
  Consumer b;
  CHECK_EQ(t->info().delayed_rows, 0u);
  set_option(*t, &TableOptions::visible_at, schema_with_timestamp());  // ...the column's delays come from the rows again
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK(!take(b, t));
  set_option(*t, &TableOptions::visible_at, schema_with_timestamp());  // a second call changes nothing
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK(!take(b, t));
  REQUIRE(t->compact().ok());
  CHECK_EQ(t->info().delayed_rows, 1u);
  CHECK(!take(b, t));
  CHECK(payload_of(*t, later) == later_row);  // compaction copied the row, and with it its time
  set_option(*t, &TableOptions::visible_at, nullptr);  // later calls change nothing
  CHECK(!take(b, t));
  CHECK_EQ(t->info().rows, 1u);
}
