// Subscriptions in the binary log (issue 44): the q4m::SubscriptionLog that writes a table's
// subscription changes into the current connection's binary log, each a change of its own
// (they commit at once, outside the transaction: the statement cache), except a subscription's
// ends inside an explicit transaction (they commit with it: its transaction cache), for a replica to apply
// (functions/subscription_replication_functions.cc):
//   SET @queue_subscribed = queue_apply_subscribe('<db>', '<table>', '<name>', '<condition>', '<start row id>')
//   SET @queue_unsubscribed = queue_apply_unsubscribe('<db>', '<table>', '<name>')
//   SET @queue_sub_ended = queue_apply_sub_end('<db>', '<table>', '<name>', '<ended ids>', '<removed ids>')
// (ids: '<id>[,<id>...]', increasing, or ''; name '' in the last: rows removed after a drop).
#pragma once

#include <string>
#include <vector>

#include "core/row/row_id.h"

namespace q4m_engine {

// At the engine's init / deinit.
void install_subscription_binlog();
void uninstall_subscription_binlog();

// Parses an id list of those statements; false (with *error) if it is not one.
bool parse_row_ids(const std::string& text, std::vector<q4m::RowId>* ids, std::string* error);

}  // namespace q4m_engine
