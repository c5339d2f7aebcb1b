// How a table's subscription changes reach another server (issue 44, replication): the
// engine's binary log (engine/subscription_binlog.h) when it is on, nothing otherwise (unit
// tests, no binary log). As ExpiryLog is for MESSAGE_TTL: one per process, set at the
// engine's init.
//
// A subscription's changes commit at once, outside the connection's transaction, so each is
// logged as a change of its own (a non-transactional statement, written at the end of the
// statement that made it, even if the transaction rolls back); except its ends inside an
// explicit transaction, which commit with it (ended_in_transaction()). A replica applies them
// (functions/subscription_replication_functions.cc) and must never decide a row itself: the
// primary decides which rows are outside a condition, and which rows every subscription
// decided; the log names the rows it removed.
#pragma once
#include <string_view>
#include <vector>

#include "core/row/row_id.h"
#include "core/util/status.h"

namespace q4m {

class QueueTable;

class SubscriptionLog {
 public:
  virtual ~SubscriptionLog() = default;
  // queue_subscribe() made `name` over the rows from `start` on (the start as written).
  virtual Status subscribed(const QueueTable& table, std::string_view name, std::string_view condition,
                            RowId start) = 0;
  // queue_unsubscribe() dropped `name` (the rows it alone held follow as removed()).
  virtual Status unsubscribed(const QueueTable& table, std::string_view name) = 0;
  // Subscription `name` ended `ended` (none: only removals), and the table removed `removed`,
  // the rows every subscription had decided (`name` empty: after a drop). Ids increase.
  virtual Status ended(const QueueTable& table, std::string_view name, const std::vector<RowId>& ended,
                       const std::vector<RowId>& removed) = 0;

  // The same, for ends inside the connection's transaction: logged with it (the binary log's
  // transaction cache), applied by a replica with its other changes. By default as ended().
  virtual Status ended_in_transaction(const QueueTable& table, std::string_view name, const std::vector<RowId>& ids,
                                      const std::vector<RowId>& removed) {
    return ended(table, name, ids, removed);
  }

  static SubscriptionLog* get();
  static void set(SubscriptionLog* log);  // null: none
};

}  // namespace q4m
