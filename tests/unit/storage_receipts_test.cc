// Receipts (core/table/receipts.h): rows taken on behalf of no connection, each ended, given
// back or renewed by its receipt, all or nothing for a list.
#include <thread>

#include "core/table/receipts.h"
#include "check.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using std::chrono::milliseconds;

namespace {

const milliseconds kLong(60000);

std::vector<Receipts::Received> receive(Receipts& r, const std::shared_ptr<QueueTable>& t, size_t n,
                                        milliseconds lease = kLong, milliseconds timeout = milliseconds(0)) {
  std::vector<Receipts::Received> out;
  Status s = r.receive({t, nullptr}, n, lease, timeout, nullptr, &out);
  if (!s.ok()) out.clear();
  return out;
}

Status end_now(Receipts& r, const std::vector<std::string>& receipts, size_t* ended) {
  Transaction txn(1);
  Status s = r.end(receipts, txn, ended);
  if (s.ok()) s = txn.commit();
  return s;  // (a failure: the transaction's destructor rolls its claims back)
}

}  // namespace

TEST(received_rows_are_held_by_their_receipts_until_ended_by_them) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a", "b", "c"}, &ids);
  REQUIRE(t);
  auto r = Receipts::of(t);
  auto got = receive(*r, t, 2);
  REQUIRE(got.size() == 2u);
  CHECK_EQ(got[0].id, ids[0]);
  CHECK_EQ(got[1].id, ids[1]);
  CHECK_EQ(got[0].deliveries, 1u);
  CHECK(got[0].receipt.find(std::to_string(ids[0]) + ":") == 0);
  CHECK_EQ(t->info().owned_rows, 2u);
  CHECK_EQ(r->held(), 2u);
  // No connection's consumer sees or takes them.
  Consumer other;
  REQUIRE(take(other, t));
  CHECK_EQ(other.owned_rowid(), ids[2]);
  REQUIRE(other.abort().ok());

  size_t ended = 0;
  REQUIRE(end_now(*r, {got[1].receipt}, &ended).ok());
  CHECK_EQ(ended, 1u);
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(r->held(), 1u);
  // A receipt ends once.
  Status again = end_now(*r, {got[1].receipt}, &ended);
  CHECK(again.code() == ErrorCode::kLeaseExpired);
  CHECK(again.message().find(got[1].receipt) != std::string::npos);
  CHECK_EQ(Receipts::of(t).get(), r.get());  // one book per queue
}

TEST(a_list_with_one_bad_receipt_changes_nothing) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a", "b"});
  REQUIRE(t);
  auto r = Receipts::of(t);
  auto got = receive(*r, t, 2);
  REQUIRE(got.size() == 2u);
  size_t n = 0;
  Status s = end_now(*r, {got[0].receipt, "1:zz"}, &n);
  CHECK(s.code() == ErrorCode::kInvalid);
  CHECK(s.message().find("'1:zz' is not a receipt") != std::string::npos);
  std::string forged = got[1].receipt;
  forged.back() = forged.back() == '9' ? '8' : '9';  // another take of the same row
  s = end_now(*r, {got[0].receipt, forged}, &n);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  s = r->abort({got[0].receipt, got[0].receipt}, milliseconds(0), &n);
  CHECK(s.code() == ErrorCode::kInvalid);  // twice
  s = r->renew({got[1].receipt, std::to_string(got[1].id) + ":0000000000000001.1"}, kLong, &n);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("since the table was last opened") != std::string::npos);
  CHECK_EQ(t->info().rows, 2u);
  CHECK_EQ(r->held(), 2u);
  REQUIRE(end_now(*r, {got[0].receipt, got[1].receipt}, &n).ok());
  CHECK_EQ(n, 2u);
  CHECK_EQ(t->info().rows, 0u);
}

TEST(an_expired_receipt_cannot_end_the_rows_next_delivery) {
  TempDir dir;
  std::vector<RowId> ids;
  auto t = table_with(dir.file("t"), {"a"}, &ids);
  REQUIRE(t);
  auto r = Receipts::of(t);
  auto first = receive(*r, t, 1, milliseconds(30));
  REQUIRE(first.size() == 1u);
  // The lease runs out; the row is handed out again, to another receipt.
  auto second = receive(*r, t, 1, kLong, milliseconds(10000));
  REQUIRE(second.size() == 1u);
  CHECK_EQ(second[0].id, ids[0]);
  CHECK_EQ(second[0].deliveries, 2u);
  CHECK(second[0].receipt != first[0].receipt);
  size_t n = 0;
  Status s = end_now(*r, {first[0].receipt}, &n);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("earlier delivery") != std::string::npos);
  s = r->renew({first[0].receipt}, kLong, &n);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().owned_rows, 1u);
  REQUIRE(end_now(*r, {second[0].receipt}, &n).ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(an_expired_lease_makes_the_receipt_stale_even_before_the_row_is_taken_again) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a"});
  REQUIRE(t);
  auto r = Receipts::of(t);
  auto got = receive(*r, t, 1, milliseconds(20));
  REQUIRE(got.size() == 1u);
  REQUIRE(eventually([&] { return t->info().owned_rows == 0; }));
  size_t n = 0;
  Status s = end_now(*r, {got[0].receipt}, &n);
  CHECK(s.code() == ErrorCode::kLeaseExpired);
  CHECK(s.message().find("lease (0.02 s) ran out") != std::string::npos);
  CHECK_EQ(t->info().rows, 1u);
}

TEST(abort_by_receipt_gives_the_row_back_after_its_delay_with_its_delivery_counted) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a"});
  REQUIRE(t);
  set_option(*t, &TableOptions::max_deliveries, 2);
  auto r = Receipts::of(t);
  auto got = receive(*r, t, 1);
  REQUIRE(got.size() == 1u);
  size_t n = 0;
  REQUIRE(r->abort({got[0].receipt}, milliseconds(1500), &n).ok());
  CHECK_EQ(n, 1u);
  CHECK(receive(*r, t, 1).empty());  // delayed
  auto again = receive(*r, t, 1, kLong, milliseconds(10000));
  REQUIRE(again.size() == 1u);
  CHECK_EQ(again[0].deliveries, 2u);
  REQUIRE(r->abort({again[0].receipt}, milliseconds(0), &n).ok());
  CHECK_EQ(t->info().dead_rows, 1u);  // MAX_DELIVERIES=2
  CHECK(receive(*r, t, 1).empty());
}

TEST(renew_keeps_the_row_past_its_first_lease) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a"});
  REQUIRE(t);
  auto r = Receipts::of(t);
  auto got = receive(*r, t, 1, milliseconds(5000));
  REQUIRE(got.size() == 1u);
  size_t n = 0;
  REQUIRE(r->renew({got[0].receipt}, kLong, &n).ok());
  CHECK_EQ(n, 1u);
  const auto owned = t->owned_rows();
  REQUIRE(owned.size() == 1u);
  CHECK(owned[0].lease_left_ms > 30000);  // the renewed lease, not the first one
  CHECK_EQ(owned[0].connection_id, 0u);   // held by no connection
  REQUIRE(end_now(*r, {got[0].receipt}, &n).ok());
  CHECK_EQ(t->info().rows, 0u);
}

TEST(a_rolled_back_end_gives_the_row_back_to_the_queue) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {"a"});
  REQUIRE(t);
  auto r = Receipts::of(t);
  auto got = receive(*r, t, 1);
  REQUIRE(got.size() == 1u);
  {
    Transaction txn(1);
    size_t n = 0;
    REQUIRE(r->end({got[0].receipt}, txn, &n).ok());
    txn.rollback();
  }
  CHECK_EQ(t->info().rows, 1u);
  CHECK_EQ(t->info().owned_rows, 0u);
  auto again = receive(*r, t, 1);
  REQUIRE(again.size() == 1u);
  CHECK_EQ(again[0].deliveries, 2u);
}

TEST(a_waiting_receive_gets_the_next_insert_and_times_out_without_rows) {
  TempDir dir;
  auto t = table_with(dir.file("t"), {});
  REQUIRE(t);
  auto r = Receipts::of(t);
  CHECK(receive(*r, t, 5, kLong, milliseconds(20)).empty());
  std::vector<Receipts::Received> got;
  std::thread waiter([&] { got = receive(*r, t, 5, kLong, milliseconds(10000)); });
  wait_for_waiters(*t);
  REQUIRE(insert1(*t, "a").ok());
  waiter.join();
  CHECK_EQ(got.size(), 1u);
  std::vector<Receipts::Received> out;
  CHECK(r->receive({t, nullptr}, 1, milliseconds(0), milliseconds(0), nullptr, &out).code() == ErrorCode::kInvalid);
}

TEST(receipt_lists_split_on_commas) {
  std::vector<std::string> v;
  REQUIRE(Receipts::split(" 1:a , 2:b", 10, &v).ok());
  CHECK_EQ(v.size(), 2u);
  CHECK_EQ(v[0], std::string("1:a"));
  CHECK_EQ(v[1], std::string("2:b"));
  CHECK(Receipts::split("", 10, &v).code() == ErrorCode::kInvalid);
  CHECK(Receipts::split("1:a,,2:b", 10, &v).code() == ErrorCode::kInvalid);
  CHECK(Receipts::split("1,2,3", 2, &v).code() == ErrorCode::kInvalid);
}
