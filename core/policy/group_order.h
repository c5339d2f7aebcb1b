// GroupOrder: the bookkeeping of MESSAGE_GROUP_COLUMN and its limits (policy/message_groups.h),
// with no locks and no knowledge of the table: which rows of each group may go out now.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/policy/token_bucket.h"
#include "core/util/clock.h"

namespace q4m {

// A group's rows go out in row-id order, at most `concurrency` at once (GROUP_CONCURRENCY,
// 1 by default: one at a time) and at most `rate` per second (GROUP_RATE, a token bucket per
// group of `burst` tokens).
//
// A row is in line while it is not dead (nor lent out by queue_take_dead()). The group's
// *window* is its first `concurrency` rows in line, whatever their state: a row owned,
// delayed for a retry or claimed by a DELETE or a transaction keeps its place there until it
// is gone or dead (not one whose end frees its slot: MessageGroups takes a row ended inside
// its owner's next wait, or claimed for MESSAGE_TTL's expiry, out of line at once). Only
// free rows of the window may go, and no more of them than the group's free slots
// (`concurrency` minus its rows out: owned, in line; this matters only for a dead row that
// comes back ahead of rows that are out) and its whole tokens. Those that may go
// are the group's *ready* rows, its first free rows of the window; they are offered in
// row-id order. With concurrency 1 this is a strict FIFO per group: its first row in line
// goes out alone.
//
// Not thread-safe: it lives in the table's state, under the state lock. The caller reports
// every state change of a member (refresh), every hand-out (handed_out, for the tokens) and
// every removal (remove), and runs due() when next_due() says; rows that became ready are
// then collected with take_newly_ready() and offered to waiters.
class GroupOrder {
 public:
  using RowId = uint64_t;
  using Time = SteadyClock::time_point;
  // The table's view of a row: whether it still exists, is in line (not dead), is free,
  // is out (owned, and in line).
  struct RowView {
    bool exists = false;
    bool in_line = false;
    bool free = false;
    bool out = false;
  };
  using RowLookup = std::function<RowView(RowId)>;

  struct Limits {
    uint32_t concurrency = 1;  // 0 = no limit
    double rate = 0;           // hand-outs per second per group; 0 = no limit
    uint32_t burst = 1;
    bool operator==(const Limits& o) const {
      return concurrency == o.concurrency && rate == o.rate && burst == o.burst;
    }
    bool operator!=(const Limits& o) const { return !(*this == o); }
  };
  // New limits. A new concurrency looks at every row again (O(rows)); a new rate keeps each
  // group's tokens (up to the new burst).
  void set_limits(const Limits& limits, const RowLookup& lookup, Time now);
  const Limits& limits() const { return limits_; }

  // Row `id` joins group `key`. Rows join in row-id order, except a row that comes back.
  void add(RowId id, std::string_view key, const RowLookup& lookup, Time now);
  // Row `id` is gone (removed from the table): the group's next rows may be ready.
  void remove(RowId id, const RowLookup& lookup, Time now);
  // Row `id` changed state (taken, returned, delayed, claimed, dead, back from the dead).
  void refresh(RowId id, const RowLookup& lookup, Time now);
  // Every row may have changed whether it is in line (the delivery limit changed): O(rows).
  void refresh_all(const RowLookup& lookup, Time now);
  // Row `id`, one of the group's ready rows, is handed out: the group spends a token. Before
  // its refresh().
  void handed_out(RowId id, Time now);
  // The timer: groups whose next token is there let rows go; a group with no rows left is
  // forgotten once its bucket is full again (until then a new row of its key would find it
  // empty: a key that comes and goes gets no extra tokens). Returns when it is due next.
  Time due(const RowLookup& lookup, Time now);
  Time next_due() const { return wakes_.empty() ? Time::max() : wakes_.front().at; }

  bool is_member(RowId id) const { return member_.count(id) != 0; }
  // The key of member `id`'s group (null if it is no member).
  const std::string* key_of(RowId id) const {
    auto it = member_.find(id);
    return it == member_.end() ? nullptr : &groups_[it->second.slot].key;
  }
  bool is_ready(RowId id) const { return ready_.count(id) != 0; }
  // The oldest ready row (0 if none).
  RowId first_ready() const { return ready_.empty() ? 0 : *ready_.begin(); }
  // Rows that became ready since the last call (some may have been taken since).
  std::vector<RowId> take_newly_ready();
  bool has_newly_ready() const { return !newly_ready_.empty(); }
  // The same list, when the caller offered those rows itself (new rows, as publish does).
  void forget_newly_ready() { newly_ready_.clear(); }

  // Figures: groups with rows; groups with free rows none of which may go now (at their
  // limit); free rows in line that may not go now (held back).
  size_t group_count() const { return groups_with_rows_; }
  size_t groups_at_limit() const { return at_limit_; }
  size_t held_back() const { return free_rows_ - ready_.size(); }
  // Up to `max` groups holding rows back, the most held back first.
  struct HeldGroup {
    RowId row = 0;          // one of its rows (its key is in it)
    uint64_t out = 0;       // rows out (owned)
    uint64_t ready = 0;     // rows that may go now
    uint64_t held = 0;      // free rows that may not
    bool by_rate = false;   // it waits for a token (else for its window or slots)
    int64_t next_token_ms = -1;  // until its next token; -1: no GROUP_RATE, or one is there
  };
  std::vector<HeldGroup> held_groups(size_t max, Time now) const;

  void clear();

 private:
  struct Group {
    bool used = false;  // else its slot is free
    std::string key;
    // The group's rows in row-id order; ids that left (not in member_) are dropped lazily,
    // from the front at once and elsewhere once they outnumber the members.
    std::deque<RowId> rows;
    size_t members = 0;
    size_t out = 0;        // members out (Member::out)
    size_t free = 0;       // members free and in line (Member::free)
    // With a concurrency N: the window is the in-line members up to `wlast`, `wcount` <= N
    // of them (fewer only if the group has no more rows in line).
    RowId wlast = 0;
    size_t wcount = 0;
    std::set<RowId> open;  // free members in the window (Member::open)
    size_t ready = 0;      // the first `ready` of `open` are ready: those up to `rlast`
    RowId rlast = 0;
    TokenBucket bucket;
    Time wake = Time::max();  // of its entry in wakes_ (a token, or an idle bucket's refill)
    uint32_t generation = 0;  // of its slot: a wake for a group that ended is stale
    bool at_limit = false;    // counted in at_limit_
  };
  struct Member {
    uint32_t slot = 0;     // its group in groups_
    bool out = false;      // at its last add/refresh
    bool in_line = false;
    bool free = false;     // free and in line
    bool open = false;     // in its group's `open`
  };
  struct Wake {
    Time at;
    uint32_t slot;
    uint32_t generation;
  };
  static bool later(const Wake& a, const Wake& b) { return a.at > b.at; }

  // Takes row `id`'s new view `v` into its group (counts, window, open rows, ready rows).
  void apply(RowId id, Member& m, const RowView& v, Time now);
  // The window grows to N rows in line / shrinks to N (a row in line came back inside it).
  void extend(Group& g);
  void shrink(Group& g);
  RowId previous_in_line(const Group& g, RowId id) const;
  bool in_window(const Group& g, RowId id) const {
    return limits_.concurrency == 0 || (g.wlast != 0 && id <= g.wlast);
  }
  void set_open(Group& g, RowId id, Member& m, bool open);
  // Sets the group's ready rows: its first open rows, as many as its slots and tokens allow.
  void fit(uint32_t slot, Time now);
  // Forgets the window, open and ready rows of a group and makes them again from its members.
  void rebuild(uint32_t slot, Time now);
  void schedule(uint32_t slot, Time at);
  void release_slot(uint32_t slot);
  void prune(Group& g);

  Limits limits_;
  std::unordered_map<std::string, uint32_t> by_key_;
  std::vector<Group> groups_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<RowId, Member> member_;  // grouped row -> its group
  std::set<RowId> ready_;
  std::vector<RowId> newly_ready_;
  std::vector<Wake> wakes_;  // a min-heap on `at`
  size_t groups_with_rows_ = 0;
  size_t at_limit_ = 0;
  size_t free_rows_ = 0;  // Member::free, over all groups
};

}  // namespace q4m
