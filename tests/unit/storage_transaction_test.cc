// Transaction (core/table/transaction.h): rows it inserts and rows it removes take effect at
// its commit, together; its rollback leaves nothing behind and gives removed rows back.
#include "check.h"
#include <thread>

#include "core/file/format.h"
#include "core/table/transaction.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;

TEST(inserted_rows_are_invisible_until_commit_and_then_taken_in_order) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a"});
  REQUIRE(t);
  Transaction txn(7);
  txn.insert(t, "b");
  txn.insert(t, "c");
  CHECK_EQ(txn.staged(t.get()), 2u);
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(scan(*t).size(), 1u);  // nobody else sees them
  Consumer c;
  REQUIRE(take(c, t));
  REQUIRE(c.end().ok());
  CHECK(!take(c, t));  // not handed out before the commit
  REQUIRE(txn.commit().ok());
  CHECK_EQ(t->info().rows, 2u);
  REQUIRE(take(c, t));
  std::string payload;
  bool found = false;
  REQUIRE(t->read_row(c.owned_rowid(), &payload, &found).ok());
  CHECK_EQ(payload, std::string("b"));
}

TEST(a_rollback_leaves_no_row_no_id_and_no_dedup_key_behind) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  set_dedup(*t, key_label_column("k"), std::chrono::seconds(300));
  const RowId next = t->info().next_rowid;
  {
    Transaction txn(7);
    txn.insert(t, key_label_row("job-1", "x"));
    txn.rollback();
  }
  CHECK_EQ(t->info().rows, 0u);
  CHECK_EQ(t->info().next_rowid, next);  // no id was used: a relay sees no gap
  CHECK_EQ(t->info().dedup_keys, 0u);
  size_t deduplicated = 0;
  std::vector<std::string_view> rows;
  const std::string row = key_label_row("job-1", "y");
  rows.push_back(row);
  REQUIRE(t->insert(rows, nullptr, &deduplicated).ok());
  CHECK_EQ(deduplicated, 0u);  // the key is free
  CHECK_EQ(t->info().rows, 1u);
}

TEST(a_row_removed_in_a_transaction_is_held_until_commit_and_returns_on_rollback) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b"}, &ids);
  REQUIRE(t);
  Consumer worker(1), other(2);
  {
    Transaction txn(1);
    worker.set_transaction(&txn);
    REQUIRE(take(worker, t));
    REQUIRE(worker.end().ok());  // joins the transaction
    CHECK(!worker.owner_mode());
    CHECK_EQ(t->info().rows, 2u);
    CHECK_EQ(t->visible_count(nullptr), 1u);  // held by the transaction
    REQUIRE(take(other, t));
    CHECK_EQ(other.owned_rowid(), ids[1]);  // not the held row
    REQUIRE(other.abort().ok());
    txn.rollback();
    worker.set_transaction(nullptr);
  }
  CHECK_EQ(t->info().rows, 2u);
  REQUIRE(take(other, t));
  CHECK_EQ(other.owned_rowid(), ids[0]);  // back, first in line
  CHECK_EQ(other.owned_delivery_count(), 2u);  // its delivery count kept, as after queue_abort()
  REQUIRE(other.abort().ok());
  {
    Transaction txn(1);
    worker.set_transaction(&txn);
    REQUIRE(take(worker, t));
    REQUIRE(worker.end().ok());
    txn.insert(t, "c");
    REQUIRE(txn.commit().ok());  // the removal and the insert in one commit
    worker.set_transaction(nullptr);
  }
  CHECK_EQ(t->info().rows, 2u);
  auto after = reopen(dir.file("t"));
  REQUIRE(after);
  CHECK_EQ(after->info().rows, 2u);  // durable: b and c
}

TEST(rollback_to_a_mark_undoes_only_what_came_after_it) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b"}, &ids);
  REQUIRE(t);
  Consumer worker(1);
  Transaction txn(1);
  worker.set_transaction(&txn);
  txn.insert(t, "kept");
  REQUIRE(take(worker, t));
  REQUIRE(worker.end().ok());
  const size_t mark = txn.mark();
  txn.insert(t, "undone");
  REQUIRE(take(worker, t));
  REQUIRE(worker.end().ok());
  txn.rollback_to(mark);
  CHECK_EQ(t->visible_count(nullptr), 1u);  // b is back
  REQUIRE(txn.commit().ok());
  worker.set_transaction(nullptr);
  std::vector<std::string> left;
  for (auto& [id, payload] : scan(*t)) left.push_back(payload);
  REQUIRE(left.size() == 2u);
  CHECK_EQ(left[0], std::string("b"));
  CHECK_EQ(left[1], std::string("kept"));
}

TEST(a_commit_refused_by_max_rows_writes_nothing_and_gives_the_removed_rows_back) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b"}, &ids);
  REQUIRE(t);
  set_option(*t, &TableOptions::max_rows, uint64_t{2});
  Consumer worker(1);
  Transaction txn(1);
  worker.set_transaction(&txn);
  REQUIRE(take(worker, t));
  REQUIRE(worker.end().ok());
  txn.insert(t, "c");
  txn.insert(t, "d");  // one removed, two added: 3 rows > 2
  Status s = txn.commit();
  worker.set_transaction(nullptr);
  CHECK(s.code() == ErrorCode::kFull);
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(t->visible_count(nullptr), 2u);  // a is back
}

TEST(an_owner_whose_lease_ran_out_cannot_end_into_a_transaction) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a"});
  REQUIRE(t);
  Consumer worker(1);
  worker.set_lease(std::chrono::milliseconds(30));
  Transaction txn(1);
  worker.set_transaction(&txn);
  REQUIRE(take(worker, t));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Status s = worker.end();
  worker.set_transaction(nullptr);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(txn.empty());
  CHECK_EQ(t->visible_count(nullptr), 1u);
}

// MariaDB's commit_ordered: the coordinator orders commits (its binary log's order) by calling
// queue_commit() in that order; the rows then take their places in that order, whichever
// commit() finishes first, so a replica applying the log in order holds the same queue.
TEST(prepared_transactions_place_their_rows_in_the_order_their_commits_were_queued) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  Transaction first(1), second(2);
  first.insert(t, "first");
  second.insert(t, "second");
  REQUIRE(first.prepare("xid-1").ok());
  REQUIRE(second.prepare("xid-2").ok());
  second.queue_commit();  // the coordinator's order: second, then first
  first.queue_commit();
  REQUIRE(first.commit().ok());  // first finishes first, from its own thread
  std::thread other([&] { REQUIRE(second.commit().ok()); });
  other.join();
  const auto rows = scan(*t);
  REQUIRE(rows.size() == 2u);
  CHECK_EQ(rows[0].second, std::string("second"));
  CHECK_EQ(rows[1].second, std::string("first"));
  CHECK(rows[0].first < rows[1].first);
  CHECK(t->prepared_parts().empty());
}

// A queued end is the coordinator's decision: a rollback after it still commits the part.
TEST(a_queued_commit_is_written_even_if_the_transaction_is_rolled_back_after) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  Transaction txn(1);
  txn.insert(t, "kept");
  REQUIRE(txn.prepare("xid-1").ok());
  txn.queue_commit();
  txn.rollback();
  CHECK_EQ(t->info().rows, 1u);
  CHECK(t->prepared_parts().empty());
}

// With the binary log coordinating, a commit record waits for no sync (the log recovers the
// transaction) until the checkpoint asks for one: MariaDB's commit_checkpoint_request.
TEST(an_end_the_coordinator_keeps_recoverable_waits_for_no_sync_until_a_checkpoint) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  Transaction txn(1);
  txn.insert(t, "a");
  REQUIRE(txn.prepare("xid-1").ok());
  const uint64_t syncs = global_stats().sys_sync.get();
  txn.queue_commit(/*durable=*/false);
  REQUIRE(txn.commit().ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs);  // written, not synced
  CHECK_EQ(t->info().rows, 1u);                     // and handed out already
  REQUIRE(t->sync_commits().ok());
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);
  REQUIRE(t->sync_commits().ok());  // nothing unsynced: no sync
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);
  auto after = reopen(dir.file("t"));
  REQUIRE(after);
  CHECK_EQ(after->info().rows, 1u);
  CHECK(after->prepared_parts().empty());
}

// An unsynced end that shares its chunk with another transaction's prepare (which syncs) is
// published and answered once written, before that sync; the chunk's other requests keep
// their order (rows in id order), and both are durable after the sync.
TEST(an_unsynced_end_sharing_a_chunk_with_a_prepare_is_answered_before_the_sync) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  const std::vector<std::string_view> before{"before"};
  REQUIRE(t->insert(before, nullptr).ok());
  Transaction first(1), second(2);
  first.insert(t, "first");
  REQUIRE(first.prepare("xid-1").ok());
  second.insert(t, "second");
  const uint64_t early = global_stats().commit_records_before_sync.get();
  first.queue_commit(/*durable=*/false);  // queued only
  REQUIRE(second.prepare("xid-2").ok());  // leads: one chunk with first's end and its prepare
  CHECK_EQ(global_stats().commit_records_before_sync.get(), early + 1);
  REQUIRE(first.commit().ok());  // already answered
  CHECK_EQ(t->info().rows, 2u);
  second.queue_commit(/*durable=*/false);
  REQUIRE(second.commit().ok());
  const auto rows = scan(*t);
  REQUIRE(rows.size() == 3u);
  CHECK(rows[0].second == "before" && rows[1].second == "first" && rows[2].second == "second");
  CHECK(rows[0].first < rows[1].first && rows[1].first < rows[2].first);
  REQUIRE(t->sync_commits().ok());
  auto after = reopen(dir.file("t"));
  REQUIRE(after);
  CHECK_EQ(after->info().rows, 3u);
  CHECK(after->prepared_parts().empty());
}

// A power cut that loses an unsynced commit record leaves the part prepared, rows and all: the
// binary log's recovery commits it again (then its rows get the ids the record would have given).
TEST(a_lost_unsynced_end_leaves_its_part_prepared_not_lost) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir, other;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  Transaction txn(1);
  txn.insert(t, "a");
  txn.insert(t, "b");
  REQUIRE(txn.prepare("xid-1").ok());
  const std::string synced = read_file_bytes(path).substr(0, t->info().file_bytes);
  txn.queue_commit(/*durable=*/false);
  REQUIRE(txn.commit().ok());
  write_file_bytes(other.file("cut"), synced);  // the end's chunk never reached the disk
  std::shared_ptr<QueueTable> cut;
  REQUIRE(TableRegistry::instance().acquire(other.file("cut"), &cut).ok());
  CHECK_EQ(cut->info().rows, 0u);
  const auto parts = cut->prepared_parts();
  REQUIRE(parts.size() == 1u);
  CHECK_EQ(parts[0].xid, std::string("xid-1"));
  REQUIRE(cut->end_part(parts[0].id, true).ok());  // what recovery does for the binary log
  const auto rows = scan(*cut);
  REQUIRE(rows.size() == 2u);
  CHECK(rows[0].first == scan(*t)[0].first && rows[1].second == "b");  // the same ids
  cut.reset();
  TableRegistry::instance().close_all();
}

// DEDUP_COLUMN under a binary log: the primary's prepare reports the positions it dropped;
// a replica (decided) drops none itself, only the positions the primary's log names.
TEST(a_replica_drops_the_duplicates_the_primary_dropped_and_no_others) {
  TempDir dir;
  auto primary = create_and_open(dir.file("p"));
  auto replica = create_and_open(dir.file("r"));
  REQUIRE(primary && replica);
  for (auto* t : {&primary, &replica}) set_dedup(**t, key_label_column("k"), std::chrono::seconds(300));
  const std::vector<std::string> rows = {key_label_row("a", "1"), key_label_row("b", "2"), key_label_row("a", "3"),
                                         key_label_row("c", "4"), key_label_row("b", "5")};
  RecordedRemovals primary_log;
  {
    Transaction txn(1);
    txn.set_replication_log(&primary_log);
    txn.insert(primary, key_label_row("x", "gone"));
    for (const std::string& r : rows) txn.insert(primary, r);
    txn.unstage(primary.get(), 0);  // deleted again: not among the positions
    REQUIRE(txn.prepare("xid-1").ok());
    REQUIRE(txn.commit().ok());
  }
  CHECK(primary_log.deduplicated_positions == std::vector<size_t>({2, 4}));
  CHECK_EQ(primary->info().rows, 3u);
  // The replica's own window already holds "c": left alone it would drop row 4 as well.
  REQUIRE(replica->insert({key_label_row("c", "0")}, nullptr).ok());
  RecordedRemovals replica_log;
  {
    Transaction txn(2);
    txn.set_replication_log(&replica_log);
    txn.set_decided(true);
    txn.insert(replica, key_label_row("x", "gone"));
    for (const std::string& r : rows) txn.insert(replica, r);
    txn.unstage(replica.get(), 0);
    CHECK(txn.drop_staged(replica, {2, 5}).code() == ErrorCode::kInvalid);  // there are 5: nothing dropped
    REQUIRE(txn.drop_staged(replica, primary_log.deduplicated_positions).ok());
    CHECK(replica_log.deduplicated_positions == primary_log.deduplicated_positions);  // logged again
    REQUIRE(txn.prepare("xid-2").ok());
    REQUIRE(txn.commit().ok());
  }
  CHECK(replica_log.deduplicated_positions == primary_log.deduplicated_positions);  // its prepare dropped none
  const auto copied = scan(*replica);
  REQUIRE(copied.size() == 4u);
  const auto original = scan(*primary);
  for (size_t i = 0; i < original.size(); i++) CHECK(copied[i + 1].second == original[i].second);
}

// A replica's rows are dated from their primary's insert (the binary log event's time), in
// memory and in the file: MESSAGE_TTL, the dedup window and the age count from there.
TEST(rows_decided_elsewhere_keep_the_insert_time_they_were_given) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  const uint64_t an_hour_ago = now_ms() - 3600 * 1000;
  for (bool two_phase : {false, true}) {
    Transaction txn(1);
    txn.set_decided(true, an_hour_ago);
    txn.insert(t, two_phase ? "prepared" : "one phase");
    if (two_phase) REQUIRE(txn.prepare("xid-t").ok());
    REQUIRE(txn.commit().ok());
  }
  CHECK(t->info().oldest_age_ms >= 3600u * 1000);
  t.reset();
  t = reopen(dir.file("t"));
  REQUIRE(t);
  CHECK_EQ(t->info().rows, 2u);
  CHECK(t->info().oldest_age_ms >= 3600u * 1000);  // recovery reads it back
  Transaction here(2);
  here.set_decided(false, an_hour_ago);  // not decided: dated now
  here.insert(t, "fresh");
  REQUIRE(here.commit().ok());
  Consumer c;
  for (int i = 0; i < 2; i++) {
    REQUIRE(take(c, t));
    REQUIRE(c.end().ok());
  }
  CHECK(t->info().oldest_age_ms < 3600u * 1000);
}

TEST(a_replica_removes_the_rows_another_server_named_and_only_if_their_bytes_match) {
  TempDir dir;
  std::vector<RowId> ids, copy_ids;
  auto primary = table_with(dir.file("p"), {"alpha", "beta", "gamma"}, &ids);
  auto replica = table_with(dir.file("r"), {"alpha", "beta", "gamma"}, &copy_ids);
  REQUIRE(primary && replica);
  CHECK(ids == copy_ids);
  RecordedRemovals log;
  Consumer worker(1);
  {
    Transaction txn(1);
    txn.set_replication_log(&log);
    worker.set_transaction(&txn);
    REQUIRE(take(worker, primary));
    REQUIRE(worker.end().ok());
    REQUIRE(txn.commit().ok());
    worker.set_transaction(nullptr);
  }
  REQUIRE(log.rows.size() == 1u);
  CHECK_EQ(log.rows[0].id, ids[0]);
  CHECK_EQ(log.rows[0].length, 5u);
  CHECK_EQ(log.rows[0].checksum, fmt::row_checksum(ids[0], "alpha"));
  {
    Transaction apply(2);
    RecordedRemovals relogged;  // a replica's own binary log (log_slave_updates) names them again
    apply.set_replication_log(&relogged);
    REQUIRE(apply.remove_named(replica, log.rows).ok());
    CHECK_EQ(replica->visible_count(nullptr), 2u);  // held until the commit
    REQUIRE(apply.commit().ok());
    CHECK(relogged.rows.size() == 1u && relogged.rows[0].checksum == log.rows[0].checksum);
  }
  CHECK_EQ(replica->info().rows, 2u);
  Transaction wrong(3);
  Status s = wrong.remove_named(replica, log.rows);  // gone already
  CHECK(s.code() == ErrorCode::kNotFound);
  std::vector<NamedRow> other = {NamedRow{ids[1], 4, fmt::row_checksum(ids[1], "BETA")}};
  s = wrong.remove_named(replica, other);  // same id and length, other bytes
  CHECK(s.code() == ErrorCode::kInvalid);
  CHECK(s.message().find("other bytes here") != std::string::npos);
  std::vector<NamedRow> both = {NamedRow{ids[1], 4, fmt::row_checksum(ids[1], "beta")}, other[0]};
  both[1].id = ids[2];
  s = wrong.remove_named(replica, both);  // all or nothing: the first matches, the second not
  CHECK(s.code() == ErrorCode::kInvalid);
  CHECK_EQ(replica->visible_count(nullptr), 2u);
  wrong.rollback();
  Consumer local(4);  // a row held here cannot be removed by name
  REQUIRE(take(local, replica));
  std::vector<NamedRow> held = {NamedRow{ids[1], 4, fmt::row_checksum(ids[1], "beta")}};
  Transaction busy(5);
  s = busy.remove_named(replica, held);
  CHECK(s.code() == ErrorCode::kInvalid);
  CHECK(s.message().find("held by a connection") != std::string::npos);
}

// A backup's copy (mariadb-backup through tools/backup/q4m-backup): the file as of the copy,
// a prepared part included; opened, it holds the same rows under the same ids.
TEST(a_backup_copy_opens_with_the_same_rows_and_prepared_parts) {
  TempDir dir, other;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c"}, &ids);
  REQUIRE(t);
  Consumer c(1);
  REQUIRE(take(c, t));
  REQUIRE(c.end().ok());  // a is gone
  Transaction txn(2);
  txn.insert(t, "d");
  REQUIRE(txn.prepare("xid-9").ok());
  REQUIRE(t->copy_data(other.file("copy")).ok());
  std::shared_ptr<QueueTable> copy;
  REQUIRE(TableRegistry::instance().acquire(other.file("copy"), &copy).ok());
  const auto rows = scan(*copy);
  REQUIRE(rows.size() == 2u);
  CHECK(rows[0].first == ids[1] && rows[1].first == ids[2] && rows[1].second == "c");
  REQUIRE(copy->prepared_parts().size() == 1u);
  CHECK_EQ(copy->prepared_parts()[0].xid, std::string("xid-9"));
  txn.rollback();
  copy.reset();
  TableRegistry::instance().close_all();
}

namespace {

RelayTag relayed(uint32_t source, RowId id, bool reset = false) { return RelayTag{source, id, reset}; }

std::vector<std::string> payloads(QueueTable& t) {
  std::vector<std::string> out;
  for (const auto& r : scan(t)) out.push_back(r.second);
  return out;
}

// What a replica is told: the relay sources' last ids, in order.
struct RecordedRelays : RecordedRemovals {
  std::vector<std::pair<uint32_t, RowId>> sources;
  Status relayed(const QueueTable&, uint32_t source, RowId last) override {
    sources.emplace_back(source, last);
    return Status::Ok();
  }
};

}  // namespace

// Relayed rows in a transaction (queue_set_srcid in BEGIN ... COMMIT, or with the binary log
// on) are staged like others: its end decides which were received before, and records the
// source's last id with the rows; a rollback leaves the source's record as it was.
TEST(relayed_rows_in_a_transaction_are_admitted_at_its_end) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  {
    Transaction txn(1);
    txn.insert_relayed(t, "r1", relayed(7, 1));
    txn.insert_relayed(t, "r2", relayed(7, 2));
    CHECK_EQ(t->last_relayed_rowid(7), 0u);  // nothing before the end
    txn.rollback();
  }
  CHECK_EQ(t->last_relayed_rowid(7), 0u);
  CHECK_EQ(t->info().rows, 0u);
  RecordedRelays log;
  {
    Transaction txn(1);
    txn.set_replication_log(&log);
    txn.insert(t, "plain");
    txn.insert_relayed(t, "r1", relayed(7, 1));
    txn.insert_relayed(t, "r2", relayed(7, 2));
    txn.insert_relayed(t, "s5", relayed(8, 5));
    REQUIRE(txn.prepare("xid-1").ok());
    CHECK(txn.replays().empty());
    REQUIRE(txn.commit().ok());
  }
  CHECK(log.sources == (std::vector<std::pair<uint32_t, RowId>>{{7, 2}, {8, 5}}));
  CHECK_EQ(t->last_relayed_rowid(7), 2u);
  CHECK_EQ(t->last_relayed_rowid(8), 5u);
  CHECK(payloads(*t) == (std::vector<std::string>{"plain", "r1", "r2", "s5"}));
  log = RecordedRelays();
  {
    Transaction txn(2);
    txn.set_replication_log(&log);
    txn.insert_relayed(t, "r2 again", relayed(7, 2));  // a replay: dropped at the end
    txn.insert(t, "plain 2");
    txn.insert_relayed(t, "r3", relayed(7, 3));
    txn.insert_relayed(t, "r3 again", relayed(7, 3));  // received earlier in this transaction
    REQUIRE(txn.prepare("xid-2").ok());
    REQUIRE(txn.replays().size() == 1u);
    const Transaction::Replays r = txn.replays()[0];
    CHECK(r.source == 7u && r.dropped == 2u && r.relayed == 3u && r.first == 2u && r.last == 3u);
    REQUIRE(txn.commit().ok());
  }
  CHECK(log.deduplicated_positions == std::vector<size_t>({0, 3}));  // what a replica drops
  CHECK(log.sources == (std::vector<std::pair<uint32_t, RowId>>{{7, 3}}));
  CHECK(payloads(*t) == (std::vector<std::string>{"plain", "r1", "r2", "s5", "plain 2", "r3"}));
  // Mode 'w' forgets what the source sent before; one phase (no coordinator) as well.
  {
    Transaction txn(3);
    txn.insert_relayed(t, "w1", relayed(7, 1, true));
    REQUIRE(txn.commit().ok());
  }
  CHECK_EQ(t->last_relayed_rowid(7), 1u);
}

// A prepared part's relay record counts for the rows admitted after it (two relays of one
// source never both take a row), and goes with the part: kept across a restart and a
// compaction (TXN_SRCID), applied at its commit, forgotten at its rollback.
TEST(a_prepared_parts_relay_record_counts_at_once_and_survives_a_restart) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  {
    Transaction first(1);
    first.insert_relayed(t, "r1", relayed(7, 1));
    REQUIRE(first.prepare("xid-a").ok());
    Transaction second(2);
    second.insert_relayed(t, "r1 again", relayed(7, 1));
    REQUIRE(second.prepare("xid-b").ok());
    CHECK_EQ(second.replays().size(), 1u);  // the first part has it
    REQUIRE(second.commit().ok());
    CHECK_EQ(t->last_relayed_rowid(7), 0u);  // not committed yet
    first.detach();  // an XA transaction left prepared
  }
  REQUIRE(t->compact().ok());
  t.reset();
  TableRegistry::instance().close_all();
  t = reopen(path);
  REQUIRE(t);
  auto parts = t->prepared_parts();
  REQUIRE(parts.size() == 1u);
  {
    Transaction again(3);
    again.insert_relayed(t, "r1 third", relayed(7, 1));  // still pending after the restart
    REQUIRE(again.prepare("xid-c").ok());
    CHECK_EQ(again.replays().size(), 1u);
    REQUIRE(again.commit().ok());
  }
  REQUIRE(t->end_part(parts[0].id, true).ok());
  CHECK_EQ(t->last_relayed_rowid(7), 1u);
  CHECK(payloads(*t) == (std::vector<std::string>{"r1"}));
  t.reset();
  TableRegistry::instance().close_all();
  t = reopen(path);  // the TXN_END applied its TXN_SRCID
  REQUIRE(t);
  CHECK_EQ(t->last_relayed_rowid(7), 1u);
  {  // a rolled-back part's record is gone, in memory and after a restart
    Transaction txn(4);
    txn.insert_relayed(t, "r2", relayed(7, 2));
    REQUIRE(txn.prepare("xid-d").ok());
    txn.rollback();
  }
  CHECK_EQ(t->last_relayed_rowid(7), 1u);
  Transaction txn(5);
  txn.insert_relayed(t, "r2", relayed(7, 2));
  REQUIRE(txn.commit().ok());
  CHECK(txn.replays().empty());  // accepted: the rolled-back part took nothing
  CHECK(payloads(*t) == (std::vector<std::string>{"r1", "r2"}));
  t.reset();
  TableRegistry::instance().close_all();
}

// A replica applies its primary's record of a source with the transaction (not at once): a
// rollback leaves none, a commit records it durably, and its log is told again (chained
// replicas).
TEST(a_replicas_relay_record_commits_with_its_transaction) {
  TempDir dir;
  const std::string path = dir.file("t");
  auto t = create_and_open(path);
  REQUIRE(t);
  {
    Transaction txn(1);
    txn.record_relay(t, 9, 40);
    txn.rollback();
  }
  CHECK_EQ(t->last_relayed_rowid(9), 0u);
  RecordedRelays log;
  {
    Transaction txn(2);
    txn.set_replication_log(&log);
    txn.set_decided(true);
    const size_t mark = txn.mark();
    txn.record_relay(t, 9, 30);
    txn.rollback_to(mark);  // a failed statement takes its record back
    txn.record_relay(t, 9, 41);
    REQUIRE(txn.prepare("xid-r").ok());
    REQUIRE(txn.commit().ok());
  }
  CHECK(log.sources == (std::vector<std::pair<uint32_t, RowId>>{{9, 41}}));
  t.reset();
  TableRegistry::instance().close_all();
  t = reopen(path);
  REQUIRE(t);
  CHECK_EQ(t->last_relayed_rowid(9), 41u);
  t.reset();
  TableRegistry::instance().close_all();
}

// queue_redrive_dead() in a transaction (with the binary log on): the dead rows are claimed
// and named for the log, their copies staged (insert time kept, no dedup drop); at the
// commit the copies get ids at the queue's end and the dead rows go. A replica applying the
// named rows does the same, to the same ids. A rollback leaves the rows dead.
TEST(a_redrive_in_a_transaction_replaces_dead_rows_by_copies_at_its_commit) {
  TempDir dir;
  auto primary = create_and_open(dir.file("p"));
  auto replica = create_and_open(dir.file("r"));
  REQUIRE(primary && replica);
  for (auto* t : {&primary, &replica}) set_dedup(**t, key_label_column("k"), std::chrono::seconds(300));
  const uint64_t an_hour_ago = now_ms() - 3600 * 1000;
  for (auto* t : {&primary, &replica}) {
    Transaction txn(1);
    txn.set_decided(true, an_hour_ago);
    txn.insert(*t, key_label_row("a", "1"));
    txn.insert(*t, key_label_row("b", "2"));
    txn.insert(*t, key_label_row("c", "3"));
    REQUIRE(txn.commit().ok());
  }
  set_option(*primary, &TableOptions::max_deliveries, uint32_t{1});
  Consumer c;
  for (int i = 0; i < 2; i++) {  // rows 1 and 2 die on the primary
    REQUIRE(take(c, primary));
    REQUIRE(c.abort().ok());
  }
  CHECK_EQ(primary->info().dead_rows, 2u);
  {
    Transaction txn(2);
    size_t n = 0;
    REQUIRE(txn.redrive_dead(primary, 10, &n).ok());
    CHECK_EQ(n, 2u);
    txn.rollback();
  }
  CHECK_EQ(primary->info().dead_rows, 2u);  // dead again
  RecordedRemovals log;
  {
    Transaction txn(3);
    txn.set_replication_log(&log);
    size_t n = 0;
    REQUIRE(txn.redrive_dead(primary, 10, &n).ok());
    CHECK_EQ(n, 2u);
    CHECK_EQ(primary->info().rows, 3u);  // until the commit
    REQUIRE(txn.prepare("xid-redrive").ok());
    REQUIRE(txn.commit().ok());
  }
  REQUIRE(log.redriven_rows.size() == 2u);
  CHECK(log.rows.empty());  // logged as a redrive, not as a removal
  CHECK_EQ(primary->info().dead_rows, 0u);
  CHECK_EQ(primary->info().dedup_keys, 3u);  // the copies' keys were not taken for duplicates
  CHECK(primary->info().oldest_age_ms >= 3600u * 1000);  // their age kept
  CHECK_EQ(primary->counters().rows_redriven.get(), 2u);
  {
    Transaction txn(4);
    txn.set_decided(true);
    REQUIRE(txn.redrive_named(replica, log.redriven_rows).ok());
    REQUIRE(txn.prepare("xid-replica").ok());
    REQUIRE(txn.commit().ok());
  }
  const auto on_primary = scan(*primary), on_replica = scan(*replica);
  REQUIRE(on_primary.size() == 3u);
  CHECK(on_primary == on_replica);  // the same rows under the same ids
  CHECK(key_label_of(on_primary[0].second) == "3");
  CHECK(key_label_of(on_primary[1].second) == "1");
  CHECK(on_primary[1].first > 3u);
  {  // a replica whose row has other bytes refuses, and keeps it
    Transaction txn(5);
    std::vector<NamedRow> wrong = {NamedRow{on_replica[0].first, 1, 0}};
    CHECK(txn.redrive_named(replica, wrong).code() == ErrorCode::kInvalid);
  }
  CHECK_EQ(scan(*replica).size(), 3u);
}

// A one-phase commit that only removes rows honours queue_sync_removals=OFF (a DELETE in
// autocommit is such a transaction since issue 42's one write path); new rows always sync.
TEST(a_one_phase_commit_of_removals_alone_skips_the_sync_when_told) {
  SyncModeScope durable(SyncMode::kFdatasync);
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c"}, &ids);
  REQUIRE(t);
  Consumer viewer(9);
  uint64_t syncs = global_stats().sys_sync.get();
  {
    Transaction txn(1);
    txn.set_sync_removals(false);
    REQUIRE(txn.remove_visible(t, &viewer, ids[0]));
    REQUIRE(txn.commit().ok());
  }
  CHECK_EQ(global_stats().sys_sync.get(), syncs);  // written, not synced
  CHECK_EQ(t->info().rows, 2u);
  {
    Transaction txn(1);
    txn.set_sync_removals(false);
    REQUIRE(txn.remove_visible(t, &viewer, ids[1]));
    txn.insert(t, "d");
    REQUIRE(txn.commit().ok());
  }
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);  // a new row: synced
  syncs = global_stats().sys_sync.get();
  {
    Transaction txn(1);  // the default: removals sync
    REQUIRE(txn.remove_visible(t, &viewer, ids[2]));
    REQUIRE(txn.commit().ok());
  }
  CHECK_EQ(global_stats().sys_sync.get(), syncs + 1);
  auto after = reopen(dir.file("t"));
  REQUIRE(after);
  CHECK(payloads(*after) == std::vector<std::string>{"d"});
}

// A replay's "last received" is the source's record before the transaction, in one phase as
// at a prepare (one phase read it after its own rows counted).
TEST(a_one_phase_commits_replay_names_the_record_before_it) {
  TempDir dir;
  auto t = create_and_open(dir.file("t"));
  REQUIRE(t);
  {
    Transaction txn(1);
    for (RowId id : {3, 5, 8}) txn.insert_relayed(t, "r" + std::to_string(id), relayed(7, id));
    REQUIRE(txn.commit().ok());
  }
  Transaction txn(2);
  for (RowId id : {3, 5, 8, 9, 12}) txn.insert_relayed(t, "again " + std::to_string(id), relayed(7, id));
  REQUIRE(txn.commit().ok());
  REQUIRE(txn.replays().size() == 1u);
  const Transaction::Replays r = txn.replays()[0];
  CHECK(r.dropped == 3u && r.relayed == 5u && r.first == 3u && r.last == 8u);
  CHECK_EQ(r.recorded, 8u);
  CHECK_EQ(t->last_relayed_rowid(7), 12u);
}
