// Subscriptions (issue 44): named consumer groups over one queue table's rows. Each has its
// own row set (the rows from its start on that match its condition), its own holders,
// delivery counts, retry delays and dead rows, and is seen by consumers as a QueueTable of
// its own ('events@billing'), so Consumer and the SQL functions use it unchanged.
//
// The table keeps one copy of each row: a row is removed (REMOVE) once every subscription
// has decided it: ended it (SUB_REMOVE, written in the same chunk as the REMOVE that
// frees the row when it is the last), or found it outside its condition (not recorded: the
// payload does not change, so it is decided again after a restart). Rows older than every
// subscription stay plain rows, taken by queue_wait('events') as before (Table::takeable).
//
// Per subscription the state is a frontier (`floor`: every row below it is decided) and a
// sparse map of the rows above it that it has touched (held, returned, ended, dead): a
// table without subscriptions keeps nothing and pays one comparison per takeable check.
//
// Locks: Subscriptions::state_ (a Guarded<State>: the subscriptions, their rows, the ends in
// transactions) is locked before the table's state lock and never held across a commit;
// waiters_ (a Guarded<Waiters>: the takes waiting on each subscription) is a leaf, locked under
// state_, or under the table's state lock by row_added(). Lease expiries and retry delays are
// applied when the subscription is next used (a take, an end) and by the table's timer pass
// (due()).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <functional>
#include <vector>

#include "core/file/recovery.h"
#include "core/file/write_batch.h"
#include "core/row/filter.h"
#include "core/row/row_id.h"
#include "core/table/queue_table.h"
#include "core/util/guarded.h"
#include "core/util/status.h"

namespace q4m {

class Table;
class Transaction;
class ReplacementFile;
class SubscriptionTable;
struct CommitRequest;

// What INFORMATION_SCHEMA.QUEUE_SUBSCRIPTIONS and queue_stats() list per subscription.
struct SubscriptionInfo {
  std::string name;
  std::string condition;  // as given (empty: every row)
  uint32_t number = 0;    // in the data file (SUBSCRIBE)
  RowId start = 0;        // its first row id
  // Rows it has not ended yet (its lag): held and dead ones included, and rows its condition
  // has not been evaluated on since the table was opened.
  uint64_t pending_rows = 0;
  uint64_t oldest_age_ms = 0;  // of the oldest of them (0: none)
  uint64_t owned_rows = 0;     // held by its consumers now
  uint64_t delayed_rows = 0;   // given back with a retry delay
  uint64_t dead_rows = 0;      // at MAX_DELIVERIES (queue_take_dead('tbl@sub'))
  uint64_t rows_delivered = 0; // hand-outs since the table was opened
  uint64_t rows_ended = 0;     // ends since the table was opened
  uint64_t waiters = 0;
};

class Subscriptions {
 public:
  explicit Subscriptions(Table& table);
  ~Subscriptions();
  Subscriptions(const Subscriptions&) = delete;
  Subscriptions& operator=(const Subscriptions&) = delete;

  // At open: what the file holds (recovery), rows no longer live dropped.
  void restore(std::map<uint32_t, RecoveredSubscription>& subs, uint32_t next_number);

  // queue_subscribe(): a new subscription over the rows from the oldest still in the table
  // (from_oldest) or from the next one inserted, durably (a SUBSCRIBE record). kInvalid if
  // the name is taken or malformed.
  // Logged (SubscriptionLog) with the start it got.
  Status create(std::string_view name, std::string_view condition, bool from_oldest);
  // queue_unsubscribe(): durably gone (UNSUBSCRIBE); its holders' rows are no longer
  // theirs, and the rows only it still needed are removed. kNotFound if there is none.
  Status drop(std::string_view name);

  // ---- a replica applying its primary's log (SubscriptionLog): each is logged again (a
  // chained replica), and is a no-op if it was applied already (an applier that crashed
  // between this change and its position applies the event again).
  // The subscription as the primary made it, with its start row id. kExists if one of that
  // name has another start or condition.
  Status apply_subscribe(std::string_view name, std::string_view condition, RowId start);
  // Dropped, without removing a row itself (the log names the rows the primary removed).
  Status apply_unsubscribe(std::string_view name);
  // `name` (empty: none) ended the rows `ended`, and the table removes `removed`: those of
  // them still there. A `name` that is no subscription here (its end was logged after its
  // drop) ends nothing.
  Status apply_ends(std::string_view name, const std::vector<RowId>& ended, const std::vector<RowId>& removed);
  // The same inside the applier's transaction `txn` (the primary's end was in a transaction):
  // they take effect at its commit, as the primary's did; none if it rolls back. At once as
  // apply_ends() when there is nothing to hold (no such subscription, every row decided).
  Status apply_ends_in(Transaction& txn, std::string_view name, const std::vector<RowId>& ended,
                       const std::vector<RowId>& removed);
  // The subscription as a table consumers take from; null if there is none.
  std::shared_ptr<QueueTable> find(std::string_view name);
  // Its condition, for the engine to compile (found false if there is none).
  std::string condition_of(std::string_view name, bool* found);
  // The compiled condition (null: every row); until set, takes evaluate nothing and wait.
  void set_filter(std::string_view name, std::shared_ptr<const RowFilter> filter);
  std::vector<SubscriptionInfo> list();
  bool any() const { return count_.load(std::memory_order_acquire) > 0; }
  bool is_subscription(const QueueTable* t);

  // ---- the table's hooks
  // Under the table's state lock: a new row is in the index (wakes waiters).
  void row_added();
  // The table was dropped or truncated: waiters are told / rows forgotten.
  void table_dropped(const std::string& message);
  void truncated();
  // Compaction's new file: every subscription and the rows it ended that are still live
  // (under the table's writer lock: no commit runs meanwhile).
  void keep(ReplacementFile& out, const std::function<bool(RowId)>& live);
  // The table's timer pass: lease expiries and retry delays; the next time it is needed.
  std::chrono::steady_clock::time_point due(std::chrono::steady_clock::time_point now);

  // ---- a subscription's ends inside a transaction (the table's side of a prepared part)
  // Prepared part `id` of the table ended (committed or rolled back): the ends it made.
  void part_ended(uint64_t id, bool committed);
  // At open, after restore(): the ends of the parts still prepared, held by them again.
  void restore_parts(const std::map<uint64_t, PreparedPart>& parts);
  // Compaction's new file: part `id`'s ends (TXN_SUB_REMOVE), if it made any.
  void keep_part(ReplacementFile& out, uint64_t id);

 private:
  friend class SubscriptionTable;
  struct Sub;
  struct SubRow;
  struct State;

  // ---- SubscriptionTable's calls (by the subscription's number: it may be dropped meanwhile)
  QueueTable::Take take(uint32_t sub, const TakeRequest& r, bool register_waiter, bool dead);
  // One pass of take() under state_: its result, or none to scan again. `gone`: rows to
  // remove once state_ is unlocked (logged as `name`'s).
  std::optional<QueueTable::Take> take_locked(State& st, uint32_t sub, const TakeRequest& r, bool register_waiter,
                                              bool dead, uint64_t generation, std::vector<RowId>* gone,
                                              std::string* name);
  void unregister(uint32_t sub, const Receiver* r);
  Status end_rows(uint32_t sub, const Holder* h, const RowId* ids, size_t count);
  size_t abort_rows(uint32_t sub, const Holder* h, const RowId* ids, size_t count, std::chrono::milliseconds delay);
  Status settle_lease(uint32_t sub, const Holder* h);
  Status renew_lease(uint32_t sub, const Holder* h, std::chrono::milliseconds lease);
  std::vector<OwnedRowInfo> owned_rows(uint32_t sub);
  // queue_release_owned('tbl@sub', id): row `id`, held by a consumer of `sub`, and every other
  // row of its holder there go back as if its lease had run out.
  Status release_owned(uint32_t sub, RowId id, uint64_t by_connection, size_t* released);
  // queue_redrive_dead('tbl@sub'): up to `max` of its dead rows, oldest first, are free for it
  // again (delivery count 0), in place. queue_purge_dead('tbl@sub'): ended for it, as its
  // queue_end() would (SUB_REMOVE, the row removed if it was the last to need it).
  Status redrive_dead(uint32_t sub, size_t max, size_t* moved);
  Status purge_dead(uint32_t sub, size_t max, size_t* purged);
  SubscriptionInfo info(uint32_t sub, bool* found);

  // ---- under state_: given the locked State, or one of its subscriptions (a Sub is
  // reachable only through it)
  bool decided(const Sub& s, RowId id) const;  // ended (or ending), outside its condition, below its start
  void advance_floor(Sub& s);
  void expire(Sub& s, std::chrono::steady_clock::time_point now);  // leases, delays
  void back_to_queue(Sub& s, RowId id, SubRow& row, std::chrono::milliseconds delay);
  void return_holder_rows(Sub& s, const Holder* h);  // its lease ran out
  // After commit_ends(): rows left kEnding are done, or back (owned, or dead) if it failed.
  void settle_ending(Sub& s, const std::vector<RowId>& ending, bool ok, bool back_dead);
  // Rows of s no longer out (ended): their group's next row or a slot may go (subscription_gates.h).
  void release_gates(Sub& s, const std::vector<RowId>& ids);
  // Of `ids`, the rows every subscription decided that no REMOVE is being committed for:
  // claimed (st.removing) for the caller's REMOVE.
  std::vector<RowId> removable(State& st, const std::vector<RowId>& ids);
  void fill_info(Sub& s, SubscriptionInfo* out);
  void wake(Sub& s, bool all);  // waiters of s (waiters_ locked here)
  // ---- without state_
  void plain_floor_changed();  // the table's plain takes: rows older than every subscription
  // Commits REMOVEs of `ids` (claimed by removable()), then forgets the claims; logged as
  // removed by subscription `by` (empty: none).
  Status remove_parent_rows(const std::vector<RowId>& ids, bool sync, const std::string& by);
  Status create_at(std::string_view name, std::string_view condition, RowId start);  // 0: the next row
  Status drop_subscription(std::string_view name, bool remove_rows);
  // Commits subscription `sub`'s ends of `ended` (SUB_REMOVE; sub 0 and none: no record) and
  // the REMOVE of `removed`, rows claimed by removable(). Outside state_.
  Status commit_ends(uint32_t sub, const std::vector<RowId>& ended, const std::vector<RowId>& removed, bool sync);

  // ---- a subscription's ends inside a transaction (SubscriptionTable's calls; see
  // "Ends in a transaction" in subscriptions.cc). The rows `owner` owns become held by the
  // transaction `txn` (still not decided: no other subscription's end removes them), and the
  // rows this end leaves decided by every subscription are claimed in the table for its
  // removal; both logged (SubscriptionLog::ended_in_transaction) now, in the transaction.
  Status claim_ends(uint32_t sub, const Holder* owner, const RowId* ids, size_t count, const Holder* txn);
  // Rolled back (ids null: all of txn's in this subscription): the rows go back to it.
  void release_ends(uint32_t sub, const Holder* txn, const RowId* ids, size_t count);
  // The transaction's ends as a prepared part (TXN_SUB_REMOVE, TXN_REMOVE) / in one commit.
  Status prepare_ends(uint32_t sub, const Holder* txn, std::string_view xid, uint64_t* id);
  Status commit_txn_ends(uint32_t sub, const Holder* txn);
  // Of the rows `txn` claimed in the table, those in `mine` (this subscription's ends to
  // remove); the rest (a plain end in the same transaction) stay claimed for its own part.
  std::vector<RowId> take_own_claims(const Holder* txn, std::vector<RowId> mine);
  // After they committed (or, committed false, rolled back): the rows done, or back.
  // `recheck`: remove the rows its commit left decided by every subscription that it did not
  // claim (another subscription's end came meanwhile); never on a replica's applied ends.
  void settle_ends(uint32_t sub, const std::vector<RowId>& ended, const std::vector<RowId>& removed,
                   const Holder* holder, bool committed, bool recheck = true);

  Table& table_;
  // Ends inside transactions (State::txn_ends, State::part_ends).
  struct TxnEnds {
    std::vector<RowId> ended, removed;
    bool applied = false;  // a replica's (apply_ends_in)
  };
  struct PartEnds {
    uint32_t sub = 0;
    std::vector<RowId> ended, removed;
    std::unique_ptr<Holder> holder;
    bool applied = false;
  };
  Status commit_txn_part(uint32_t number, const Holder* txn, const TxnEnds& t, CommitRequest* req);
  // Moves out the ends transaction `txn` made in subscription `number`; false if none.
  bool take_txn_ends(uint32_t number, const Holder* txn, TxnEnds* t);
  // What state_ guards: a Sub is reached only through it.
  struct State {
    std::map<uint32_t, std::unique_ptr<Sub>> subs;
    uint32_t next_number = 1;
    std::set<RowId> removing;  // parent rows a REMOVE is being committed for
    // Ends inside transactions: claimed (by transaction and subscription), and prepared (by
    // part; its holder holds the rows, here and in the table).
    std::map<std::pair<const Holder*, uint32_t>, TxnEnds> txn_ends;
    std::map<uint64_t, PartEnds> part_ends;
    Sub* by_number(uint32_t sub);
    Sub* by_name(std::string_view name);
  };
  Guarded<State> state_;
  std::atomic<size_t> part_count_{0};  // part_ends.size(): part_ended() of a table without any costs a load
  std::atomic<size_t> count_{0};       // subs.size()
  // The takes waiting on each subscription, by its number (dropped: no entry). Reached without
  // state_ by row_added() (under the table's state lock).
  using Waiters = std::map<uint32_t, std::list<TakeRequest>>;
  Guarded<Waiters> waiters_;
  std::atomic<uint64_t> generation_{0};  // new rows: a take that saw none rescans before it registers
};

}  // namespace q4m
