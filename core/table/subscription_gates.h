// SubscriptionGates: what one subscription (subscriptions.h) may hand out now, by the table's
// limits applied to the subscription alone, as if it were a queue of its own:
//   - MESSAGE_GROUP_COLUMN and GROUP_CONCURRENCY: a group's rows go out in row-id order, at
//     most N at once (1 by default: the next only once the row before it is ended or dead for
//     this subscription); another subscription's rows of the group do not count;
//   - GROUP_RATE / GROUP_BURST: a token bucket per group and subscription;
//   - MAX_IN_FLIGHT: rows of this subscription out at once; MAX_RATE / MAX_BURST: hand-outs
//     of this subscription per second.
//
// A take scans the subscription's free rows in row-id order (Subscriptions::take) and asks
// allows() for each; rows out are known here from handed_out() until released(). The group
// rule needs only the rows out and the free rows the scan passed, so the state costs one entry
// per group with a row out (or a bucket not yet full), and one per row out: nothing per row
// waiting. Nothing is in the file: after a restart no row is out and buckets start full (as
// for the table's own limits).
//
// Not thread-safe: it lives in a subscription, under Subscriptions::state_.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/policy/options.h"
#include "core/policy/token_bucket.h"
#include "core/row/row_id.h"
#include "core/util/clock.h"

namespace q4m {

class SubscriptionGates {
 public:
  using Time = SteadyClock::time_point;

  // The table's options as they stand (cheap when unchanged: called at every take).
  void configure(const TableOptions& options, Time now);
  // Whether any gate is set: without one, a release wakes nobody.
  bool active() const { return grouped_ || max_in_flight_ != 0 || bucket_.limited(); }

  // Whether the subscription may hand out a row now (MAX_IN_FLIGHT, MAX_RATE).
  bool open(Time now);

  // One take's scan, in row-id order, of the subscription's rows.
  class Scan {
   private:
    friend class SubscriptionGates;
    std::unordered_map<std::string, uint32_t> passed;  // free rows in line the scan did not take
    std::unordered_set<std::string> pruned;            // groups whose held rows were checked
  };
  // Whether row `id` of group `key` (null: no group), free for the subscription, may go now.
  // Before refusing it for its group's rows out, once per scan and group, those gone from the
  // table (a DELETE, MESSAGE_TTL: `live` false) leave the line.
  template <class Live>
  bool allows(Scan& scan, RowId id, const std::string* key, Time now, Live&& live) {
    if (allows(scan, id, key, now)) return true;
    if (!key || !grouped_ || !scan.pruned.insert(*key).second) return false;
    prune(*key, live);
    return allows(scan, id, key, now);
  }
  bool allows(Scan& scan, RowId id, const std::string* key, Time now);
  // The scan passed row `id` of group `key` without taking it (a condition did not match it,
  // or it is not visible yet): it keeps its place in its group's line.
  void passed(Scan& scan, const std::string* key);

  // Row `id` of group `key` went out (not for queue_take_dead(): a dead row is in no line).
  void handed_out(RowId id, const std::string* key, Time now);
  // Row `id`, out, came back with a retry delay: no longer in flight, still in its group's line.
  void delayed(RowId id);
  // Row `id` is ended, free again, dead or gone: it leaves its group's line and the flight.
  // True if that may let a waiting take find a row.
  bool released(RowId id);
  // The rows held in a group's line that are gone from the table (`live` false): released.
  template <class Live>
  void prune(const std::string& key, Live&& live);

  // When the token a refused take waits for comes (Time::max(): none), and whether it came.
  Time next_token() const { return token_at_; }
  bool token_came(Time now);
  // Groups with nothing out whose bucket is full again are forgotten.
  void sweep(Time now);
  void clear();

  uint64_t in_flight() const { return in_flight_; }
  size_t groups() const { return groups_.size(); }

 private:
  struct Group {
    std::set<RowId> held;  // its rows out or delayed for a retry: in line, not free
    TokenBucket bucket;
  };
  struct Out {
    std::string key;  // its group ("" with `grouped` false: none)
    bool grouped = false;
    bool flying = true;  // counted in in_flight_ (not while delayed)
  };
  Group& group(const std::string& key, Time now);
  void wait_for_token(Time at);

  bool grouped_ = false;
  uint32_t concurrency_ = 1;
  double group_rate_ = 0;
  uint32_t group_burst_ = 1;
  uint64_t max_in_flight_ = 0;
  double max_rate_ = 0;
  uint32_t max_burst_ = 1;
  TokenBucket bucket_;  // MAX_RATE
  std::unordered_map<std::string, Group> groups_;
  std::unordered_map<RowId, Out> out_;
  uint64_t in_flight_ = 0;
  Time token_at_ = Time::max();
};

template <class Live>
void SubscriptionGates::prune(const std::string& key, Live&& live) {
  auto g = groups_.find(key);
  if (g == groups_.end()) return;
  std::vector<RowId> gone;
  for (RowId id : g->second.held)
    if (!live(id)) gone.push_back(id);
  for (RowId id : gone) released(id);
}

}  // namespace q4m
