// Conditional subscriptions: queue_wait('t:expr'). A small hand-written compiler
// turns `expr` into a RowFilter over TableSchema's columns (see storage/row_payload.h).
#pragma once
#include <memory>
#include <string_view>

#include "../storage/row_filter.h"
#include "../storage/row_payload.h"
#include "../storage/status.h"

namespace q4m::cond {

// Compiles `expr`. On error returns kInvalid with a message naming the table, the
// position (1-based character offset) and what is wrong, e.g.
//   "queue_wait('db.q:prio >'): syntax error at position 7: expected an operand"
Status compile(std::string_view expr, const TableSchema& schema, std::shared_ptr<const RowFilter>* out);

}  // namespace q4m::cond
