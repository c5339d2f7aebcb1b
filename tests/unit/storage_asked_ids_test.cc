// Rows that ask for ids (ROW_ID_COLUMN, a restored dump) and the id floor (CREATE TABLE ...
// AUTO_INCREMENT=N): core/row/id_sequence.h. The ids a commit gives are the ids recovery
// gives again from the file, for one-phase commits (ROW records carry them) and for prepared
// parts (TXN_ASK, ID_FLOOR and the TXN_END's first id).
#include "check.h"

#include "core/row/id_sequence.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

std::vector<RowId> ids_of(QueueTable& t) {
  std::vector<RowId> ids;
  for (const auto& [id, payload] : scan(t)) ids.push_back(id);
  return ids;
}

std::vector<std::pair<RowId, std::string>> rows_of(QueueTable& t) { return scan(t); }

Status insert_asking(QueueTable& t, const std::vector<std::string>& rows, const std::vector<RowId>& asked,
                     std::vector<RowId>* ids = nullptr) {
  std::vector<std::string_view> views(rows.begin(), rows.end());
  return t.insert(views, ids, nullptr, asked.data());
}

}  // namespace

TEST(an_asked_id_is_given_unless_one_at_or_above_it_was_and_the_floor_is_for_rows_asking_none) {
  IdSequence ids{1, 100};
  CHECK_EQ(ids.give(5), 5u);     // below the floor, above every id given: kept
  CHECK_EQ(ids.give(0), 100u);   // asks for none: the floor
  CHECK_EQ(ids.give(50), 101u);  // given out already (100 is): the next id
  CHECK_EQ(ids.give(200), 200u);
  CHECK_EQ(ids.give(0), 201u);
  CHECK_EQ(ids.upcoming(), 202u);
  IdSequence plain;
  CHECK_EQ(plain.give(0), 1u);
  CHECK_EQ(plain.upcoming(), 2u);
}

TEST(a_one_phase_insert_keeps_asked_ids_and_a_reopen_reads_them_back) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  std::vector<RowId> ids;
  REQUIRE(insert_asking(*t, {"a", "b", "c", "d"}, {10, 0, 0, 30}, &ids).ok());
  CHECK(ids == std::vector<RowId>({10, 11, 12, 30}));
  REQUIRE(insert_asking(*t, {"e"}, {20}, &ids).ok());  // 20 < 31: the next id
  CHECK(ids == std::vector<RowId>({31}));
  CHECK_EQ(t->info().next_rowid, 32u);
  auto crashed = crash_copy(dir, dir.file("t"), "crashed");
  REQUIRE(crashed);
  CHECK(ids_of(*crashed) == std::vector<RowId>({10, 11, 12, 30, 31}));
  t = reopen(dir.file("t"));
  REQUIRE(t);
  CHECK(rows_of(*t) == (std::vector<std::pair<RowId, std::string>>{{10, "a"}, {11, "b"}, {12, "c"}, {30, "d"}, {31, "e"}}));
}

// A restored dump: CREATE TABLE ... AUTO_INCREMENT=100, its rows asking for their old ids (all
// below 100), then the rows the primary inserts after the dump's point, from 100 on.
TEST(the_floor_is_for_rows_asking_none_and_holds_across_reopen_crash_compaction_and_truncate) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(t->raise_id_floor(100).ok());
  CHECK_EQ(t->info().next_rowid, 100u);  // the id the next row asking none gets
  std::vector<RowId> ids;
  REQUIRE(insert_asking(*t, {"a", "b"}, {5, 7}, &ids).ok());
  CHECK(ids == std::vector<RowId>({5, 7}));
  CHECK_EQ(t->ids().next, 8u);
  CHECK_EQ(t->ids().upcoming(), 100u);
  REQUIRE(t->raise_id_floor(50).ok());  // never lowers it
  CHECK_EQ(t->ids().upcoming(), 100u);

  auto crashed = crash_copy(dir, path, "crashed");  // no clean close
  REQUIRE(crashed);
  CHECK_EQ(crashed->ids().upcoming(), 100u);
  t = reopen(path);  // a clean close (no index snapshot holds the floor: the file is read)
  REQUIRE(t);
  CHECK_EQ(t->ids().upcoming(), 100u);
  REQUIRE(t->compact().ok());
  t = reopen(path);
  REQUIRE(t);
  CHECK_EQ(t->ids().upcoming(), 100u);
  CHECK(ids_of(*t) == std::vector<RowId>({5, 7}));
  REQUIRE(insert_asking(*t, {"c"}, {0}, &ids).ok());
  CHECK(ids == std::vector<RowId>({100}));

  REQUIRE(t->raise_id_floor(1000).ok());
  REQUIRE(t->truncate().ok());
  t = reopen(path);
  REQUIRE(t);
  CHECK_EQ(t->ids().upcoming(), 1000u);
  REQUIRE(insert_asking(*t, {"d"}, {0}, &ids).ok());
  CHECK(ids == std::vector<RowId>({1000}));
  t = reopen(path);  // past the floor: an index snapshot again
  REQUIRE(t);
  CHECK_EQ(t->ids().upcoming(), 1001u);
}

// A prepared part's rows get their ids at its commit; recovery gives the same ones from the
// TXN_ASK record, the TXN_END's first id and the floor.
TEST(a_prepared_part_asking_ids_gets_them_at_its_commit_and_recovery_gives_them_again) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  REQUIRE(t->raise_id_floor(50).ok());
  {
    Transaction txn(1);
    txn.insert(t, "a", 10);
    txn.insert(t, "b");
    txn.insert(t, "c", 20);
    REQUIRE(txn.prepare("xid-1").ok());
    std::vector<RowId> ids;
    REQUIRE(insert_asking(*t, {"x"}, {15}, &ids).ok());  // committed first: 15
    CHECK(ids == std::vector<RowId>({15}));
    REQUIRE(txn.commit().ok());  // 10 and 20 were passed by then: the next ids, from the floor on
  }
  const std::vector<std::pair<RowId, std::string>> want{{15, "x"}, {50, "a"}, {51, "b"}, {52, "c"}};
  CHECK(rows_of(*t) == want);
  auto crashed = crash_copy(dir, path, "crashed");
  REQUIRE(crashed);
  CHECK(rows_of(*crashed) == want);
  CHECK_EQ(crashed->ids().upcoming(), 53u);

  // Prepared, then a crash: the part commits after recovery with the ids it asked for.
  {
    Transaction txn(2);
    txn.insert(t, "d", 100);
    txn.insert(t, "e");
    txn.insert(t, "f", 200);
    REQUIRE(txn.prepare("xid-2").ok());
    auto copy = crash_copy(dir, path, "prepared");
    REQUIRE(copy);
    REQUIRE(copy->compact().ok());  // the part stays prepared, its asked ids with it
    copy = reopen(dir.file("prepared"));
    REQUIRE(copy);
    const auto parts = copy->prepared_parts();
    REQUIRE(parts.size() == 1u);
    REQUIRE(copy->end_part(parts[0].id, true).ok());
    CHECK(ids_of(*copy) == std::vector<RowId>({15, 50, 51, 52, 100, 101, 200}));
    auto again = crash_copy(dir, dir.file("prepared"), "prepared-again");
    REQUIRE(again);
    CHECK(ids_of(*again) == std::vector<RowId>({15, 50, 51, 52, 100, 101, 200}));
    txn.rollback();
  }
}
