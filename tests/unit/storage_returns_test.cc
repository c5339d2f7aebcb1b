// RETURN records: a row that goes back to the queue (queue_abort, a disconnect, an expired
// lease) keeps its delivery count and its retry delay across a crash, a clean reopen
// (index snapshot) and a compaction. A delivery still in progress when the server stops
// is not counted.
#include <chrono>
#include <thread>

#include "core/util/crc32c.h"
#include "core/file/index_snapshot.h"
#include "core/file/recovery.h"
#include "core/table/transaction.h"
#include "core/util/stats.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

// Hands the next row to a new consumer and aborts it, `times` times; the row's id.
RowId deliver_and_abort(const std::shared_ptr<QueueTable>& t, int times) {
  RowId id = 0;
  for (int i = 0; i < times; i++) {
    Consumer c;
    if (!take(c, t)) return 0;
    id = c.owned_rowid();
    if (!c.abort().ok()) return 0;
  }
  return id;
}


// A new table at `path` whose one row (*id) was handed out and aborted once (a counted
// delivery), then handed to `owner`: its second delivery is in progress. Null if that failed.
std::shared_ptr<QueueTable> job_in_its_second_delivery(const std::string& path, Consumer& owner, RowId* id) {
  std::vector<RowId> ids;
  auto t = table_with(path, {"job"}, &ids);
  if (!t || deliver_and_abort(t, 1) != ids[0] || !take(owner, t) || owner.owned_delivery_count() != 2u) return nullptr;
  *id = ids[0];
  return t;
}

// Takes the next row of `r` with `c`: it must be `id`, handed out for the `count`-th time.
void check_next_delivery(Consumer& c, const std::shared_ptr<QueueTable>& r, RowId id, uint32_t count) {
  REQUIRE(take(c, r));
  CHECK_EQ(c.owned_rowid(), id);
  CHECK_EQ(c.owned_delivery_count(), count);
}

// A new table at `path` holding `rows`; the first (the job, its id in *job) has been handed
// out once and given back for `delay`. Null if any of that failed.
std::shared_ptr<QueueTable> table_with_delayed_job(const std::string& path, milliseconds delay, RowId* job,
                                                   std::initializer_list<const char*> rows = {"job"}) {
  std::vector<RowId> ids;
  auto t = table_with(path, rows, &ids);
  if (!t) return nullptr;
  *job = ids[0];
  Consumer a;
  if (!take(a, t) || a.owned_rowid() != *job || !a.abort(delay).ok()) return nullptr;
  return t;
}

}  // namespace

TEST(delivery_counts_survive_a_crash_a_compaction_and_a_clean_reopen) {
  TempDir dir;
  const std::string path = dir.file("t");
  std::vector<RowId> ids;
  auto t = table_with(path, {"poison", "fine"}, &ids);
  REQUIRE(t);
  const RowId first = ids[0], second = ids[1];
  REQUIRE(deliver_and_abort(t, 3) == first);
  {
    Consumer gone;  // a consumer that disconnects while owning the row counts too
    REQUIRE(take(gone, t));
    CHECK_EQ(gone.owned_delivery_count(), 4u);
  }
  // Checked on crash copies first: the original is left as it is for the next way of reopening.
  auto check_counts = [&](const std::shared_ptr<QueueTable>& r, const char* how) {
    Consumer c, d;
    check_next_delivery(c, r, first, 5);  // four ended without a removal; this is the fifth
    if (c.owned_delivery_count() != 5u) std::fprintf(stderr, "  after %s\n", how);
    check_next_delivery(d, r, second, 1);  // never returned: nothing recorded
  };
  auto crashed = crash_copy(dir, path, "crash");
  REQUIRE(crashed);
  check_counts(crashed, "crash");
  REQUIRE(t->compact().ok());
  auto compacted = crash_copy(dir, path, "compacted");
  REQUIRE(compacted);
  check_counts(compacted, "compaction, then crash");
  t.reset();
  t = reopen(path);
  REQUIRE(t);
  check_counts(t, "clean reopen");
}

// A delivery in progress when the server stops is not counted: the row was owned, or (binary
// log on) an owner's end was a prepared part holding the row until the log's commit. Not by a
// compaction meanwhile either: a crash before the commit rolls the part back (the log never
// had it) and the row comes back as after any crash, not as after queue_abort() (with
// MAX_DELIVERIES=1 it came back dead).
TEST(a_delivery_in_progress_is_not_counted_after_a_crash) {
  for (bool being_ended : {false, true}) {
    TempDir dir;
    const std::string path = dir.file("t");
    Consumer owner;
    RowId id = 0;
    auto t = job_in_its_second_delivery(path, owner, &id);
    REQUIRE(t);
    Transaction txn(1);
    if (being_ended) {
      REQUIRE(txn.remove_owned(t, owner.holder(), &id, 1).ok());
      REQUIRE(txn.prepare("xid-end").ok());
    }
    for (bool compact_first : {false, true}) {
      if (compact_first) REQUIRE(t->compact().ok());  // compaction keeps ended deliveries only
      auto r = crash_copy(dir, path, compact_first ? "compacted" : "crash");
      REQUIRE(r);
      if (being_ended) {
        const auto parts = r->prepared_parts();
        REQUIRE(parts.size() == 1u);
        REQUIRE(r->end_part(parts[0].id, /*commit=*/false).ok());  // not in the binary log
      }
      Consumer c;
      check_next_delivery(c, r, id, 2);
    }
  }
}

TEST(a_retry_delay_survives_a_crash_a_clean_reopen_and_a_compaction) {
  TempDir dir;
  const std::string path = dir.file("t");
  RowId job;
  auto t = table_with_delayed_job(path, milliseconds(600000), &job, {"job", "other"});
  REQUIRE(t);
  auto check_delayed = [&](const std::shared_ptr<QueueTable>& r, const char* how) {
    CHECK_EQ(r->info().delayed_rows, 1u);
    CHECK_EQ(r->visible_count(nullptr), 2u);  // still queued, still visible
    Consumer c;
    REQUIRE(take(c, r));
    CHECK(c.owned_rowid() != job);  // the delayed row is passed over
    Consumer d;
    CHECK(!take(d, r));
    if (r->info().delayed_rows != 1u) std::fprintf(stderr, "  after %s\n", how);
    REQUIRE(c.abort().ok());
  };
  auto crashed = crash_copy(dir, path, "crash");
  REQUIRE(crashed);
  check_delayed(crashed, "crash");
  t.reset();
  t = reopen(path);
  REQUIRE(t);
  check_delayed(t, "clean reopen");
  REQUIRE(t->compact().ok());
  auto compacted = crash_copy(dir, path, "compacted");
  REQUIRE(compacted);
  check_delayed(compacted, "compaction, then crash");
}

TEST(a_delay_that_ran_out_while_the_table_was_closed_is_over) {
  TempDir dir;
  const std::string path = dir.file("t");
  RowId id;
  auto t = table_with_delayed_job(path, milliseconds(200), &id);
  REQUIRE(t);
  const int64_t aborted = wall_ms();
  std::this_thread::sleep_for(milliseconds(300));
  auto r = crash_copy(dir, path, "crash");
  REQUIRE(r);
  CHECK(wall_ms() >= aborted + 200);
  CHECK_EQ(r->info().delayed_rows, 0u);
  Consumer c;
  check_next_delivery(c, r, id, 2);
}

TEST(a_delay_still_running_at_reopen_ends_on_time) {
  TempDir dir;
  const std::string path = dir.file("t");
  RowId id;
  auto t = table_with_delayed_job(path, milliseconds(400), &id);
  REQUIRE(t);
  const int64_t due = wall_ms() + 400;
  auto r = crash_copy(dir, path, "crash");
  REQUIRE(r);
  Consumer c;
  CHECK(!take(c, r));
  REQUIRE(take(c, r, milliseconds(10000)));  // a waiter gets it when the delay ends
  CHECK(wall_ms() + 20 >= due);  // (the file keeps milliseconds of the wall clock)
  CHECK_EQ(c.owned_rowid(), id);
}

TEST(an_expired_lease_is_recorded) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = table_with(path, {"slow job"});
  REQUIRE(t);
  Consumer a;
  a.set_lease(milliseconds(50));
  REQUIRE(take(a, t));
  Consumer b;
  REQUIRE(take(b, t, milliseconds(10000)));  // handed over when a's lease ran out
  CHECK_EQ(b.owned_delivery_count(), 2u);
  // The reaper writes the record after handing the row over: look until it is there.
  uint32_t recorded = 0;
  for (int i = 0; i < 500 && recorded != 1u; i++) {
    if (i > 0) std::this_thread::sleep_for(milliseconds(10));
    auto r = crash_copy(dir, path, "crash" + std::to_string(i));
    REQUIRE(r);
    Consumer c;
    REQUIRE(take(c, r));
    recorded = c.owned_delivery_count() - 1;  // the copy's own delivery is the last one
  }
  CHECK_EQ(recorded, 1u);  // a's delivery, ended by the expiry; b's is still in progress
}

// Records may reach the file out of order (two returns of one row by racing commits): the
// one with more deliveries wins; a return of a row removed since is ignored.
TEST(the_return_with_the_most_deliveries_wins) {
  RecoveredTable t;
  RowEntry e;
  e.id = 5;
  t.index.append(e);
  apply_returned_row(fmt::ReturnedRow{5, 3, 1000}, &t);
  CHECK_EQ(t.index.find(5)->deliveries, 3u);
  CHECK_EQ(t.due_ms.at(5), 1000u);
  apply_returned_row(fmt::ReturnedRow{5, 2, 0}, &t);  // older, written later
  CHECK_EQ(t.index.find(5)->deliveries, 3u);
  CHECK_EQ(t.due_ms.at(5), 1000u);
  apply_returned_row(fmt::ReturnedRow{5, 4, 0}, &t);  // newer: no delay any more
  CHECK_EQ(t.index.find(5)->deliveries, 4u);
  CHECK(t.due_ms.count(5) == 0);
  apply_returned_row(fmt::ReturnedRow{5, 70000, 0}, &t);  // saturates like the live count
  CHECK_EQ(t.index.find(5)->deliveries, 65535u);
  apply_returned_row(fmt::ReturnedRow{9, 1, 1000}, &t);  // no such row
  CHECK(t.index.find(9) == nullptr);
  CHECK(t.due_ms.empty());
}

// An index snapshot of version 1 or 2 (written by a build before row checksums, at its clean
// shutdown) is not used: it lacks the checksums of the file's rows of formats 1 to 4, which
// the open then computes by walking the file. Same rows, same delivery counts. (Until row
// checksums, version 1 was loaded as it was.)
TEST(an_index_snapshot_from_before_row_checksums_is_not_used) {
  for (uint32_t version : {1u, 2u}) {
    TempDir dir;
    const std::string path = dir.file("t");
    auto t = table_with(path, {"a", "b"});
    REQUIRE(t);
    Consumer c(1);
    REQUIRE(take(c, t));
    REQUIRE(c.abort().ok());  // row 1: one delivery, in a RETURN record
    t.reset();
    TableRegistry::instance().close_all();
    std::string snap = read_file_bytes(index_snapshot_path(path));
    REQUIRE(snap.size() > 20);
    // Version 3 ends with "u64 n_known = 0, u32 crc"; version 2 has no n_legacy, version 1
    // no n_returned either (here one entry of kReturnEntrySize bytes and its count).
    CHECK_EQ(fmt::get_u64(snap.data() + snap.size() - 12), 0u);
    std::string old = snap.substr(0, snap.size() - 12 - (version == 1 ? 8 + fmt::kReturnEntrySize : 0));
    fmt::store_u32(&old[8], version);
    fmt::put_u32(&old, crc32c(old));
    write_file_bytes(index_snapshot_path(path), old);
    const uint64_t recoveries = global_stats().recoveries.get();
    std::shared_ptr<QueueTable> r;
    REQUIRE(TableRegistry::instance().acquire(path, &r).ok());
    CHECK_EQ(global_stats().recoveries.get(), recoveries + 1);  // walked the file
    CHECK(!file_exists(index_snapshot_path(path)));
    CHECK_EQ(scan(*r).size(), 2u);
    Consumer d(2);
    REQUIRE(take(d, r));
    CHECK_EQ(d.owned_delivery_count(), 2u);  // its first delivery came back from the file
  }
}
