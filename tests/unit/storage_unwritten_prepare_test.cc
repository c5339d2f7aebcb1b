// A prepare of removals alone that the binary log redoes (Table::prepare_unwritten): nothing is
// written at the prepare; the part's records reach the file with its end, or with a compaction
// that comes first; between the two, the redo the binary log holds is what brings the part back
// after a crash (redo_parts).
#include "check.h"

#include <algorithm>

#include "core/table/redo.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

namespace {

// Rows "a" (1) and "b" (2) in table `t` at `path`; row 1's removal prepared as a part the
// binary log redoes (`part`, 0 if that failed; its redo in `redo`).
struct RedoneRemoval {
  TempDir dir;
  const std::string path = dir.file("t");
  std::shared_ptr<QueueTable> t = table_with(path, {"a", "b"});
  const std::string before = read_file_bytes(path);  // the file before the prepare
  Consumer d;
  Holder txn;
  std::string redo;
  uint64_t part = 0;

  RedoneRemoval() {
    REQUIRE(t && t->claim_for_delete(&d, 1, &txn));
    QueueTable::Admission admission;
    admission.redo = true;
    REQUIRE(t->prepare_part(&txn, {}, "xid-1", &part, &admission).ok());
    redo = admission.redo_record;
  }
};

size_t count_of(const std::string& bytes, const std::string& what) {
  size_t n = 0;
  for (size_t at = bytes.find(what); at != std::string::npos; at = bytes.find(what, at + 1)) n++;
  return n;
}

}  // namespace

TEST(a_removal_the_binary_log_redoes_is_written_with_its_end_in_one_chunk) {
  RedoneRemoval r;
  REQUIRE(r.part != 0);
  auto& [dir, path, t, before, d, txn, redo, part] = r;
  CHECK(!redo.empty());
  CHECK(read_file_bytes(path) == before);  // the prepare wrote nothing
  REQUIRE(t->prepared_parts().size() == 1u);
  CHECK_EQ(t->visible_count(nullptr), 1u);  // row 1 is the part's
  REQUIRE(t->end_part(part, true).ok());
  CHECK_EQ(scan(*t).size(), 1u);
  CHECK_EQ(count_of(read_file_bytes(path), "xid-1"), 1u);  // its TXN_PREPARE, once
  auto copy = crash_copy(dir, path, "copy");
  REQUIRE(copy);
  CHECK(copy->prepared_parts().empty());  // ended in the file too
  CHECK_EQ(scan(*copy).size(), 1u);
  CHECK(scan(*copy)[0].second == "b");
}

TEST(a_crash_before_its_end_loses_the_part_and_its_redo_brings_it_back) {
  RedoneRemoval r;
  REQUIRE(r.part != 0);
  auto& [dir, path, t, before, d, txn, redo, part] = r;
  // Without the redo: nothing of the part is in the file, row 1 is queued again.
  auto lost = crash_copy(dir, path, "lost");
  REQUIRE(lost);
  CHECK(lost->prepared_parts().empty());
  CHECK_EQ(scan(*lost).size(), 2u);
  lost.reset();
  // With it: the binary log's recovery appends the part, then commits it by its xid. (A table
  // with a prepared part closes without an index snapshot: the file is as a crash leaves it.)
  t.reset();
  TableRegistry::instance().close_all();
  RedoPart redone;
  std::string error;
  REQUIRE(decode_redo(redo, &redone, &error));
  size_t appended = 0;
  REQUIRE(redo_parts(path, {redone}, &appended).ok());
  CHECK_EQ(appended, 1u);
  t = reopen(path);
  REQUIRE(t);
  const auto parts = t->prepared_parts();
  REQUIRE(parts.size() == 1u);
  CHECK(parts[0].xid == "xid-1");
  REQUIRE(t->end_part(parts[0].id, true).ok());
  CHECK_EQ(scan(*t).size(), 1u);
  CHECK(scan(*t)[0].second == "b");
}

TEST(a_compaction_before_its_end_writes_the_part_and_the_end_does_not_again) {
  RedoneRemoval r;
  REQUIRE(r.part != 0);
  auto& [dir, path, t, before, d, txn, redo, part] = r;
  REQUIRE(t->compact().ok());
  auto mid = crash_copy(dir, path, "mid");  // the new file holds the part, prepared
  REQUIRE(mid);
  CHECK_EQ(mid->prepared_parts().size(), 1u);
  mid.reset();
  REQUIRE(t->end_part(part, true).ok());
  CHECK_EQ(count_of(read_file_bytes(path), "xid-1"), 1u);  // the compaction's TXN_PREPARE only
  auto copy = crash_copy(dir, path, "copy");
  REQUIRE(copy);
  CHECK(copy->prepared_parts().empty());
  CHECK_EQ(scan(*copy).size(), 1u);
}

TEST(a_rolled_back_removal_gives_its_row_back) {
  RedoneRemoval r;
  REQUIRE(r.part != 0);
  auto& [dir, path, t, before, d, txn, redo, part] = r;
  REQUIRE(t->end_part(part, false).ok());
  CHECK_EQ(scan(*t).size(), 2u);
  CHECK_EQ(t->visible_count(nullptr), 2u);
  auto copy = crash_copy(dir, path, "copy");
  REQUIRE(copy);
  CHECK(copy->prepared_parts().empty());
  CHECK_EQ(scan(*copy).size(), 2u);
}

TEST(a_part_with_rows_is_written_at_its_prepare_as_before) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with(path, {"a"});
  REQUIRE(t);
  const std::string before = read_file_bytes(path);
  Holder txn;
  QueueTable::Admission admission;
  admission.redo = true;
  uint64_t part = 0;
  const std::vector<std::string_view> rows = {"new"};
  REQUIRE(t->prepare_part(&txn, rows, "xid-2", &part, &admission).ok());
  CHECK_EQ(count_of(read_file_bytes(path), "xid-2"), 1u);  // its TXN_PREPARE, written now
  CHECK(read_file_bytes(path) != before);
  CHECK(!admission.redo_record.empty());
  REQUIRE(t->end_part(part, true).ok());
  CHECK_EQ(scan(*t).size(), 2u);
}

TEST(a_consumption_in_a_transaction_the_binary_log_coordinates_prepares_unwritten) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with(path, {"a", "b"});
  REQUIRE(t);
  RedoingLog log;
  Consumer worker(1);
  Transaction txn(1);
  txn.set_replication_log(&log);
  worker.set_transaction(&txn);
  REQUIRE(take(worker, t));
  REQUIRE(worker.end().ok());
  const std::string before = read_file_bytes(path);
  REQUIRE(txn.prepare("xid-3").ok());
  CHECK(read_file_bytes(path) == before);
  REQUIRE(log.redos.size() == 1u);
  txn.queue_commit(/*durable=*/false);  // the binary log's commit order
  REQUIRE(txn.commit().ok());
  worker.set_transaction(nullptr);
  CHECK_EQ(count_of(read_file_bytes(path), "xid-3"), 1u);
  auto copy = crash_copy(dir, path, "copy");
  REQUIRE(copy);
  CHECK(copy->prepared_parts().empty());
  CHECK_EQ(scan(*copy).size(), 1u);
}
