// Row policies: the features that decide about a table's rows (MAX_ROWS, DEDUP_COLUMN,
// relayed source ids, MESSAGE_TTL, MAX_DELIVERIES, MESSAGE_GROUP_COLUMN and its limits,
// MAX_IN_FLIGHT and MAX_RATE, delayed rows, leases). Each is a plain class in its own files here, listed once in policies.h. The
// table calls every listed policy at the points every change of its rows passes; a policy
// defines the hooks it needs and inherits PolicyBase's empty ones for the rest, which
// compile away (the lists are fixed at compile time: no virtual call per row).
//
// A policy decides; the table acts. Hooks never change a row's state themselves: they
// adjust a Placement, or ask for a move through the RowContext, and the table makes every
// move through its one transition function (core/row/lifecycle.h).
//
// Two kinds, by the lock their state lives under (docs/architecture.md, "Policies"):
//
// Writer policies (WriterPolicies: relay, dedup, max rows) run in the group-commit leader,
// with the table's writer lock held, for each batch of commits:
//   configure(options, WriterContext&)     the table's options are (re)applied
//   opened(RecoveredTable&)                the file was recovered at open
//   begin_batch(WriterContext&)            a leader starts a batch
//   admit(WriteBatch&, WriterContext&)     may drop rows from b.admitted, or refuse the whole
//                                          request (return false with b.status set)
//   reject(WriteBatch&)                    a later policy refused the request admit() passed
//   persist(WriteBatch&, ChunkBuilder&)    adds the policy's records to the request's chunk
//   written(WriterContext&) / failed(WriterContext&)   the batch is durable / was not written
//   withdraw(WriteBatch&)                  a prepared part rolls back: what admit() let in for
//                                          its rows (b.rows) goes back
//   committed(WriteBatch&)                 a prepared part commits (b.txn)
//   keep(ReplacementFile&, bool truncating)  what a compacted (or truncated) file keeps
//   truncated()                            TRUNCATE installed its empty file
//   take_over(from, ChunkBuilder&)         a copying ALTER TABLE's new table takes over the
//                                          old one's queue (`from`: the same policy there):
//                                          what the policy carries over, its records in the
//                                          take-over's chunk; then written() or failed()
//
// Row policies (RowPolicies: delays, dead letters, expiry, message groups, table limits,
// leases) run
// with the table's state lock held:
//   configure(options, RowContext&)        the table's options are (re)applied
//   opened(RecoveredTable&, RowContext&)   the file was recovered at open
//   added(RowEntry&, payload, RowContext&) a new row joins the index (state kFree)
//   placing_new(RowEntry&, payload, history, Placement&, RowContext&)
//                                          where a new row starts: kFree unless a policy says
//   placing(RowEntry&, Placement&, RowContext&)
//                                          where a row coming back to the queue goes: in list
//                                          order, each policy sees (and may override) the
//                                          decisions of the ones before it
//   moved(RowEntry&, from, previous holder, Move&, RowContext&)   after every state change
//   removed(const RowEntry& before, RowContext&)   after a row left the index
//   gates(RowEntry&) / allows(RowEntry&)   the row goes out in the policy's own order / may
//                                          go out now (the row is takeable when every policy
//                                          allows it)
//   first_released() / released(out)       the oldest gated row that may go now / the gated
//                                          rows that may go since the last call (releasing():
//                                          whether there are any)
//   open() / reopened()                    the table may hand out rows at all now (a limit of
//                                          the whole table: no take, no hand-off while one
//                                          policy says no) / it said no and may say yes since
//                                          the last call (the table then serves its waiters)
//   published(RowContext&)                 the rows of one commit were added and offered
//   due(RowContext&)                       the table's timer pass; returns when it is due next
//   claimer() / claims_removed(n, counters) a holder whose claimed rows the table removes
//                                          after each pass (MESSAGE_TTL's expiry)
//   keeping(RowEntry&, ReturnedRow&)       what the file keeps of a live row across a restart
//   forget()                               every row vanished (TRUNCATE, DROP)
//   report(TableStats&)                    its figures (table_stats.h)
//   take_over(from, RowContext&)           a copying ALTER TABLE's take-over (`from`: the same
//                                          policy of the other table), once every row took
//                                          the state it has there: what the policy keeps
//                                          besides the rows' states (core/table/takeover.cc)
//
// Gating: a row is takeable when it is free and every policy allows() it. The plain scan
// (no condition) walks the rows no policy gates() and compares the first takeable one with
// each policy's first_released(); a released row another policy's allows() refuses is not
// taken (then the plain row is). So a row should be gated by one policy only: limits that
// decide which rows of a group may go live with the group's order (MessageGroups), and a
// limit for every row is open(), not a gate.
//
// A transaction (prepare, then commit or rollback) runs the same hooks: writer policies'
// admission at prepare (so that a refusal fails the statement, and what admit() reserved is
// released by failed() at rollback), row policies when its rows are published at commit.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "core/file/format.h"
#include "core/file/recovery.h"
#include "core/file/replacement_file.h"
#include "core/file/write_batch.h"
#include "core/policy/options.h"
#include "core/policy/table_stats.h"
#include "core/row/history.h"
#include "core/row/index.h"
#include "core/util/clock.h"

namespace q4m {

class DataFile;

// ---- row policies' vocabulary

enum class DelayKind : uint8_t {
  kRetry,      // queue_abort(seconds), or a copy's pending retry: the file keeps it
  kVisibleAt,  // the row's VISIBLE_AT_COLUMN: the row itself keeps it
};

// A state change: where a row goes, and what the new state needs to know.
struct Move {
  RowState to = RowState::kFree;
  const Holder* holder = nullptr;      // kOwned, kClaimed: who holds it (none: a copy's held row)
  std::chrono::milliseconds delay{0};  // kDelayed: for how long from now
  DelayKind delay_kind = DelayKind::kRetry;
  bool resume = false;                 // kDelayed: back to the delay it had (its deadline stands)
  int64_t lease_ms = 0;                // kOwned: the taker's lease (0 = none)
  bool more = false;                   // kOwned: one more row of the holder's batch (or of
                                       // its delivery as it stands: a take-over)
  bool fresh = false;                  // the row is being added (its first state)
  bool damaged = false;                // kDead: set aside, its bytes on disk failed their checksum
  EndKind ends_as = EndKind::kNone;    // kClaimed: how the row ends if the claim removes it
                                       // (its history, HISTORY_RETENTION); kNone: consumed, or
                                       // as marked before (a claim passed on)
  bool frees_slot = false;             // kClaimed by its owner's transaction, by the end inside
                                       // the owner's next take: from now on it holds no place in
                                       // its message group and no MAX_IN_FLIGHT slot (the take
                                       // may use them), though its removal waits for the commit
};

// Where a row goes as it comes back to the queue or is added: a Move the policies fold.
using Placement = Move;

// What a row policy sees of the table and may ask of it, under the state lock.
class RowContext {
 public:
  enum class Ask : uint8_t {
    kRequeue,  // back to the queue (the policies place it)
    kReturn,   // back to the queue, and its delivery count goes into a RETURN record
    kMove,     // straight to `move`
  };
  struct Request {
    RowId id;
    Ask ask;
    Move move;
  };

  RowContext(RowIndex& index, uint64_t held_rows, TableCounters* counters)
      : index(index), held_rows(held_rows), counters(counters) {}

  RowIndex& index;
  const uint64_t held_rows;                    // rows in kOwned or kClaimed
  TableCounters* const counters;
  // Now, by the wall clock and the steady one: read once, when first asked.
  uint64_t wall_ms() {
    if (wall_ms_ == 0) wall_ms_ = now_ms();
    return wall_ms_;
  }
  SteadyClock::time_point now() {
    if (now_ == SteadyClock::time_point()) now_ = SteadyClock::now();
    return now_;
  }
  // fn(e, payload) for each live row want(e) selects, reading the file front to back (set
  // for configure() only).
  std::function<void(const std::function<bool(const RowEntry&)>& want,
                     const std::function<void(RowEntry&, std::string_view)>& fn)>
      for_each_payload;

  // Asks, applied by the table in order once the hook returns.
  void requeue(RowId id) { asks.push_back(Request{id, Ask::kRequeue, Move()}); }
  void return_row(RowId id) { asks.push_back(Request{id, Ask::kReturn, Move()}); }
  void move(RowId id, const Move& m) { asks.push_back(Request{id, Ask::kMove, m}); }
  // The table's timer runs every policy's due() by then.
  void wake_at(SteadyClock::time_point t) {
    if (t < wake) wake = t;
  }

  std::vector<Request> asks;
  SteadyClock::time_point wake = SteadyClock::time_point::max();

 private:
  uint64_t wall_ms_ = 0;
  SteadyClock::time_point now_{};
};

// ---- writer policies' vocabulary

struct WriterContext {
  uint64_t now_ms = 0;
  uint64_t rows = 0;  // live rows in the table when the batch began
  TableCounters* counters = nullptr;
  const DataFile* file = nullptr;  // configure(): the file being appended to
  Status* broken = nullptr;        // configure(): set to stop every later write
};

// The empty hooks. A policy derives from it and hides the ones it needs.
struct PolicyBase {
  // writer side
  void configure(const TableOptions&, WriterContext&) {}
  void opened(RecoveredTable&) {}
  void begin_batch(WriterContext&) {}
  bool admit(WriteBatch&, WriterContext&) { return true; }
  void reject(WriteBatch&) {}
  void persist(WriteBatch&, fmt::ChunkBuilder&) {}
  void written(WriterContext&) {}
  void failed(WriterContext&) {}
  void withdraw(const WriteBatch&) {}
  void committed(const WriteBatch&) {}
  void keep(ReplacementFile&, bool /*truncating*/) {}
  void truncated() {}
  template <typename Same>
  void take_over(const Same& /*from*/, fmt::ChunkBuilder&) {}
  // row side
  void configure(const TableOptions&, RowContext&) {}
  void opened(RecoveredTable&, RowContext&) {}
  void added(RowEntry&, std::string_view /*payload*/, RowContext&) {}
  void placing_new(RowEntry&, std::string_view /*payload*/, const RowHistory*, Placement&, RowContext&) {}
  void placing(RowEntry&, Placement&, RowContext&) {}
  void moved(RowEntry&, RowState /*from*/, const Holder* /*previous*/, const Move&, RowContext&) {}
  void removed(const RowEntry&, RowContext&) {}
  bool gates(const RowEntry&) const { return false; }
  bool allows(const RowEntry&) const { return true; }
  RowId first_released() const { return 0; }
  bool releasing() const { return false; }
  void released(std::vector<RowId>*) {}
  bool open() const { return true; }
  bool reopened() { return false; }
  void published(RowContext&) {}
  SteadyClock::time_point due(RowContext&) { return SteadyClock::time_point::max(); }
  const Holder* claimer() const { return nullptr; }
  void claims_removed(size_t, TableCounters&) {}
  void keeping(const RowEntry&, fmt::ReturnedRow&) const {}
  void forget() {}
  void report(TableStats&) const {}
  template <typename Same>
  void take_over(const Same& /*from*/, RowContext&) {}
};

}  // namespace q4m
